"""torchx_core.distributed: env-based helpers without torch, a real world-of-one gloo group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import torchx_core.distributed as tdist


@pytest.fixture(autouse=True)
def no_dist_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(key, raising=False)


def test_trivial_values_outside_a_job() -> None:
    assert (tdist.rank(), tdist.world_size(), tdist.local_rank()) == (0, 1, 0)
    assert tdist.is_rank0() and tdist.is_local_rank0()


def test_values_from_the_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert (tdist.rank(), tdist.world_size(), tdist.local_rank()) == (5, 8, 1)
    assert not tdist.is_rank0() and not tdist.is_local_rank0()


def test_garbage_in_the_env_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(ValueError, match=r"\$RANK='zero' is not an integer"):
        tdist.rank()


def test_context_managers_without_a_group_just_run_the_block() -> None:
    ran = []
    with tdist.on_rank0_first():
        ran.append(1)
    with pytest.raises(KeyError), tdist.on_local_rank0_first():
        raise KeyError("propagates")
    assert ran == [1]


def test_unknown_backend_is_rejected_before_torch_is_touched() -> None:
    with pytest.raises(ValueError, match="backend='mpi' is not one of nccl, gloo, auto"):
        tdist.init_pg("mpi")  # type: ignore[arg-type]


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, torchx_core.distributed as d; d.rank(); d.world_size(); d.local_rank();"
        " print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_init_pg_world_of_one_under_plain_python() -> None:
    """A real gloo process group under plain python, even with a MASTER_PORT already in use."""
    code = textwrap.dedent(
        """
        import socket, warnings
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        import os; os.environ["MASTER_PORT"] = str(s.getsockname()[1])   # taken
        import torch.distributed as dist
        import torchx_core.distributed as d
        dev = d.init_pg()                     # auto -> gloo on this CPU host
        assert dist.is_initialized() and dist.get_backend() == "gloo"
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lr = d.local_rank()
        order = []
        with d.on_rank0_first():
            order.append("block")
        print(dev, d.local_device(), d.rank(), d.world_size(), lr, len(w), order)
        dist.destroy_process_group()
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu", "cpu", "0", "1", "0", "1", "['block']"]


def test_dist_is_torch_distributed_and_patching_it_reaches_the_helpers() -> None:
    """TorchX's module holds ``dist`` (``torch.distributed``); TorchX users patch
    ``tdist.dist.get_rank`` and friends, which the helpers then see."""
    from unittest import mock

    torch_dist = pytest.importorskip("torch.distributed")  # the dev lock holds torch's CPU wheel
    assert tdist.dist is torch_dist
    with (
        mock.patch.object(tdist.dist, "is_initialized", return_value=True),
        mock.patch.object(tdist.dist, "get_rank", return_value=3),
        mock.patch.object(tdist.dist, "get_world_size", return_value=8),
    ):
        assert (tdist.rank(), tdist.world_size(), tdist.is_rank0()) == (
            3,
            8,
            False,
        )
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tdist.nope  # noqa: B018 - the attribute access is the test
