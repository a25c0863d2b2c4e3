"""``SharedEndCheck``: log followers of one process share one batched "has it ended?" read."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from torchx_core.schedulers._logs import SharedEndCheck


def _hold(
    check: SharedEndCheck, app_id: str, started: threading.Event, release: threading.Event
) -> None:
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


def test_iter_files_lines_follows_two_files_until_done(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A replica's stdout and stderr files, followed together (slurm keeps them apart)."""
    import threading

    from torchx_core.schedulers._logs import iter_files_lines

    out, err = tmp_path / "r.out", tmp_path / "r.err"
    done = threading.Event()

    def writer() -> None:
        with open(out, "a") as fo:
            fo.write("o1\n")
            fo.flush()
            with open(err, "a") as fe:  # appears later than stdout
                fe.write("e1\n")
                fe.flush()
                fo.write("o2\n")
                fo.flush()
                fe.write("e2 no newline")
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    lines = list(
        iter_files_lines(
            [str(out), str(err)],
            should_tail=True,
            is_done=done.is_set,
            poll_interval=0.01,
            wait_for_file=5.0,
        )
    )
    t.join()
    assert sorted(lines) == sorted(["o1\n", "o2\n", "e1\n", "e2 no newline"])
    assert lines.index("o1\n") < lines.index("o2\n") and lines.index("e1\n") < lines.index(
        "e2 no newline"
    )
    assert list(iter_files_lines([str(out), str(err)])) == ["o1\n", "o2\n", "e1\n", "e2 no newline"]
    assert list(iter_files_lines([str(tmp_path / "missing.out")])) == []


def test_iter_files_lines_reads_a_file_that_appears_as_the_app_ends(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The stderr file is written just before the app ends (the moment ``is_done`` turns true):
    the last read still gets it (seen lost under load before "done" was asked first)."""
    from torchx_core.schedulers._logs import iter_files_lines

    out, err = tmp_path / "r.out", tmp_path / "r.err"
    out.write_text("o1\n")

    def ends_writing_stderr() -> bool:
        err.write_text("e1\nlast")  # the replica's final words, then it ends
        return True

    lines = list(
        iter_files_lines(
            [str(out), str(err)], should_tail=True, is_done=ends_writing_stderr, poll_interval=0.01
        )
    )
    assert sorted(lines) == ["e1\n", "last", "o1\n"]


def test_iter_file_lines_reads_a_file_that_appears_as_the_app_ends(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torchx_core.schedulers._logs import iter_file_lines

    log = tmp_path / "r.out"

    def ends_writing() -> bool:
        log.write_text("only line\n")
        return True

    assert list(
        iter_file_lines(str(log), should_tail=True, is_done=ends_writing, poll_interval=0.01)
    ) == ["only line\n"]
    assert (
        list(
            iter_file_lines(
                str(tmp_path / "never"), should_tail=True, is_done=lambda: True, poll_interval=0.01
            )
        )
        == []
    )
