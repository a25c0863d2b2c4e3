"""The ``torchx`` worker's job variables read by the table of step settings (no server)."""

from __future__ import annotations

import pytest

from torchx_core.specs.errors import is_permanent_error
from torchx_prefect.worker import InvalidWorkerConfigError, TorchXWorkerJobConfiguration


@pytest.mark.parametrize("value", [0, -1, float("nan"), "nan", "0", " -1 ", True, "soon"])
def test_a_bad_poll_interval_is_a_permanent_error_before_anything_is_submitted(
    value: object,
) -> None:
    # issue 32: 0 polled in a tight loop; -1 and nan raised after the app was submitted
    configuration = TorchXWorkerJobConfiguration(poll_interval=value)
    with pytest.raises(InvalidWorkerConfigError) as e:
        configuration.settings()
    assert "poll_interval must be a finite number of seconds > 0, got" in str(e.value)
    assert is_permanent_error(e.value)


@pytest.mark.parametrize(
    ("poll", "stream", "expected"),
    [(2, True, (2.0, True)), (" 0.5 ", "false", (0.5, False)), ("3", "ON", (3.0, True))],
)
def test_work_pool_strings_are_read_as_every_entry_point_reads_them(
    poll: object, stream: object, expected: tuple[float, bool]
) -> None:
    configuration = TorchXWorkerJobConfiguration(poll_interval=poll, stream_output=stream)
    assert configuration.settings() == expected


def test_stream_output_takes_only_switches() -> None:
    with pytest.raises(InvalidWorkerConfigError, match="stream_output must be True or False"):
        TorchXWorkerJobConfiguration(stream_output=1).settings()
