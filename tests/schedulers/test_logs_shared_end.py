"""``SharedEndCheck``: log followers of one process share one batched "has it ended?" read."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from torchx_core.schedulers._logs import SharedEndCheck


def _hold(check: SharedEndCheck, app_id: str, started: threading.Event,
          release: threading.Event) -> None:
    def lines() -> Iterator[str]:
        started.set()
        release.wait(30)
        yield "done\n"

    list(check.follow(app_id, lines()))


def test_concurrent_followers_share_one_read() -> None:
    check = SharedEndCheck(interval=60.0)
    ids = [f"app{i}" for i in range(8)]
    release = threading.Event()
    holders = []
    for app_id in ids:  # 8 followed logs, all quiet
        started = threading.Event()
        t = threading.Thread(target=_hold, args=(check, app_id, started, release))
        t.start()
        started.wait(30)
        holders.append(t)
    reads: list[list[str]] = []

    def ended_many(batch: list[str]) -> dict[str, bool]:
        reads.append(batch)
        return {a: a == "app3" for a in batch}

    barrier = threading.Barrier(len(ids))
    answers: dict[str, bool] = {}

    def ask(app_id: str) -> None:
        barrier.wait()
        answers[app_id] = check.is_done(app_id, ended_many)

    askers = [threading.Thread(target=ask, args=(a,)) for a in ids]
    for t in askers:
        t.start()
    for t in askers:
        t.join(30)
    assert reads == [ids]  # one read, for every followed app
    assert answers == {a: a == "app3" for a in ids}
    release.set()
    for t in holders:
        t.join(30)
    assert check.is_done("app0", ended_many) is False  # no longer followed: read again
    assert reads[-1] == ["app0"]


def test_a_stale_answer_is_read_again() -> None:
    check = SharedEndCheck(interval=0.0)
    state = {"a": False}
    assert check.is_done("a", lambda ids: {i: state[i] for i in ids}) is False
    state["a"] = True
    assert check.is_done("a", lambda ids: {i: state[i] for i in ids}) is True
    assert check.reads == 2


def test_an_app_missing_from_the_answer_counts_as_ended() -> None:
    check = SharedEndCheck(interval=60.0)
    assert check.is_done("gone", lambda ids: {}) is True
