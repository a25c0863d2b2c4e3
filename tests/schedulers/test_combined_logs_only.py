"""One rule for backends whose logs hold stdout and stderr together (aws_batch, sagemaker,
kubernetes, ray, lsf): asking for one stream alone raises one error, of both families."""

from __future__ import annotations

import pytest

from torchx_core.schedulers.api import (
    CombinedLogsOnlyError,
    InvalidLogQueryError,
    Stream,
    UnsupportedFeatureError,
    require_combined_streams,
)


@pytest.mark.parametrize("streams", [None, Stream.COMBINED])
def test_combined_or_default_is_accepted(streams: Stream | None) -> None:
    require_combined_streams(streams, "Ray job logs")


@pytest.mark.parametrize("streams", [Stream.STDOUT, Stream.STDERR])
def test_one_stream_alone_is_refused_with_what_to_use(streams: Stream) -> None:
    with pytest.raises(CombinedLogsOnlyError, match="COMBINED") as info:
        require_combined_streams(streams, "kubernetes pod logs")
    assert isinstance(info.value, UnsupportedFeatureError)
    assert isinstance(info.value, InvalidLogQueryError)
    assert "kubernetes pod logs hold stdout and stderr together" in str(info.value)
    assert streams.value in str(info.value) or str(streams) in str(info.value)
