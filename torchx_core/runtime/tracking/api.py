"""Key -> results stores: :class:`ResultTracker` and its fsspec implementation."""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Mapping

from torchx_core.specs.errors import TorchXError

__all__ = ["FsspecResultTracker", "KeyType", "ResultTracker", "ResultTrackerError", "ResultType"]

KeyType = int | str
ResultType = int | float | str

_MAX_STR_BYTES = 1024


class ResultTrackerError(TorchXError, ValueError):
    """A key or a result value a result tracker cannot store."""


class ResultTracker(abc.ABC):
    """Stores results (``{name: int | float | str}``) under keys (``int`` or ``str``).

    ``tracker.put(key, **results)`` and ``tracker[key] = results`` are the same;
    ``tracker.get(key)`` and ``tracker[key]`` return ``{}`` for a key never written. Names with
    slashes group statistics by convention (``"loss/mean"``, ``"loss/sem"``). A later ``put`` of
    the same key replaces its results; the consistency between writers is the store's.
    """

    def __getitem__(self, key: KeyType) -> dict[str, ResultType]:
        return self.get(key)

    def __setitem__(self, key: KeyType, results: dict[str, ResultType]) -> None:
        self.put(key, **results)

    @abc.abstractmethod
    def put(self, key: KeyType, **results: ResultType) -> None:
        """Records ``results`` under ``key`` (``str(key)``), replacing earlier ones."""

    @abc.abstractmethod
    def get(self, key: KeyType) -> dict[str, ResultType]:
        """The results recorded under ``key``, or ``{}``."""


def _check(key: KeyType, results: Mapping[str, object]) -> str:
    if isinstance(key, bool) or not isinstance(key, (int, str)) or str(key) in ("", ".", ".."):
        raise ResultTrackerError(f"result key {key!r} is not a non-empty int or str")
    for name, value in results.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ResultTrackerError(
                f"result {name}={value!r} under key {key!r}: values are int, float or str"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ResultTrackerError(f"result {name}={value!r} under key {key!r} is not finite")
        if isinstance(value, str) and len(value.encode("utf-8")) > _MAX_STR_BYTES:
            raise ResultTrackerError(
                f"result {name} under key {key!r} is a {len(value.encode())}-byte string; the"
                f" limit is {_MAX_STR_BYTES} bytes (store large values as files, results as paths)"
            )
    return str(key)


class FsspecResultTracker(ResultTracker):
    """Results as one pretty-printed JSON file per key under ``tracker_base`` (a path or URI).

    Args:
        tracker_base: directory or fsspec URI (``/tmp/sweep``, ``s3://bucket/sweep/7``)
    """

    def __init__(self, tracker_base: str) -> None:
        self.tracker_base = tracker_base

    def put(self, key: KeyType, **results: ResultType) -> None:
        import fsspec

        name = _check(key, results)
        mapper = fsspec.get_mapper(self.tracker_base, create=True)
        mapper[name] = json.dumps(results, indent=2).encode("utf-8")

    def get(self, key: KeyType) -> dict[str, ResultType]:
        import fsspec

        name = _check(key, {})
        mapper = fsspec.get_mapper(self.tracker_base)
        try:
            data = mapper[name]
        except KeyError:
            return {}
        return json.loads(data.decode("utf-8"))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"FsspecResultTracker({self.tracker_base!r})"
