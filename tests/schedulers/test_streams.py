"""``torchx_core.schedulers.streams.Tee`` (TorchX's ``torchx.schedulers.streams``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchx_core.schedulers.streams import Tee


def test_tee_copies_every_source_until_closed(tmp_path: Path) -> None:
    a, b, ab = tmp_path / "a", tmp_path / "b", tmp_path / "ab"
    with open(a, "wb", buffering=0) as fa, open(b, "wb", buffering=0) as fb:
        fa.write(b"1")
        fb.write(b"2")
        tee = Tee(open(ab, "wb", buffering=0), str(a), str(b))  # noqa: SIM115 - Tee closes it
        fa.write(b"3" * 100_000)  # more than one read
        fb.write(b"4")
    tee.write(b"5")
    tee.close()
    tee.close()  # idempotent
    data = ab.read_bytes()
    assert sorted(data) == sorted(b"12" + b"3" * 100_000 + b"45")


def test_tee_needs_a_source(tmp_path: Path) -> None:
    with (
        open(tmp_path / "out", "wb") as out,
        pytest.raises(ValueError, match="at least one source"),
    ):
        Tee(out)
