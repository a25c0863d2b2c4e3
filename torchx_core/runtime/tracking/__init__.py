"""Results of a job (or a trial of a sweep) recorded under a key: :class:`FsspecResultTracker`.

>>> import tempfile
>>> from torchx_core.runtime.tracking import FsspecResultTracker
>>> tracker = FsspecResultTracker(tempfile.mkdtemp())   # or "s3://bucket/sweep/123"
>>> tracker["trial_1"] = {"accuracy": 0.93}
>>> FsspecResultTracker(tracker.tracker_base)["trial_1"]["accuracy"]
0.93
"""

from torchx_core.runtime.tracking.api import (
    FsspecResultTracker,
    KeyType,
    ResultTracker,
    ResultType,
)

__all__ = ["FsspecResultTracker", "KeyType", "ResultTracker", "ResultType"]
