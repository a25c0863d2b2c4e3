"""The Runner on the real local scheduler: real processes, a real torch DDP job."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.service_helpers import free_port

from torchx_core.components.dist import ddp
from torchx_core.runner import Runner, get_runner
from torchx_core.specs import AppDef, AppState, Role, is_terminal, parse_app_handle

pytestmark = [pytest.mark.integration, pytest.mark.local]


@pytest.fixture
def local_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private local-scheduler state root; the venv's bin first on PATH (as if activated)."""
    root = tmp_path / "local-root"
    monkeypatch.setenv("TORCHX_LOCAL_ROOT", str(root))
    monkeypatch.setenv(
        "PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    )
    return root


@pytest.fixture
def runner(local_root: Path) -> Iterator[Runner]:
    with get_runner(component_defaults={}) as r:
        yield r
        for app in r.list("local_cwd"):  # leave no app running behind
            if not is_terminal(app.state):
                r.cancel(app.app_handle)


def test_run_component_wait_logs_list(runner: Runner) -> None:
    handle = runner.run_component(
        "utils.echo", ["--msg", "hello local", "--num_replicas", "3"], "local_cwd"
    )
    assert handle.startswith("local_cwd://torchx/echo-")
    status = runner.wait(handle, wait_interval=0.05)
    assert status is not None and status.state == AppState.SUCCEEDED
    assert [len(r.replicas) for r in status.roles] == [3]
    for k in range(3):
        assert list(runner.log_lines(handle, "echo", k)) == ["hello local\n"]
    assert handle in [a.app_handle for a in runner.list("local_cwd")]
    described = runner.describe(handle)
    assert described is not None and described.roles[0].num_replicas == 3


def test_status_from_a_fresh_runner_and_cancel(runner: Runner, local_root: Path) -> None:
    app = AppDef(
        name="sleeper",
        roles=[Role(name="sleep", image="/", entrypoint="sleep", args=["60"], num_replicas=2)],
    )
    handle = runner.run(app, "local_cwd")
    with get_runner(component_defaults={}) as other:
        st = other.status(handle)
        assert st is not None and st.state in (
            AppState.PENDING,
            AppState.RUNNING,
            AppState.SUBMITTED,
        )
        other.cancel(handle)
        final = other.wait(handle, wait_interval=0.05, timeout=30)
    assert final is not None and final.state == AppState.CANCELLED
    runner.cancel(handle)  # idempotent on a finished app
    runner.delete(handle)
    assert runner.status(handle) is None


def test_failed_replica_gives_failed_app(runner: Runner) -> None:
    app = AppDef(
        name="fail",
        roles=[Role(name="f", image="/", entrypoint="sh", args=["-c", "echo oops >&2; exit 3"])],
    )
    handle = runner.run(app, "local_cwd")
    st = runner.wait(handle, wait_interval=0.05, timeout=60)
    assert st is not None and st.state == AppState.FAILED
    assert "oops\n" in list(runner.log_lines(handle, "f", 0))


def test_workspace_runs_in_a_copy_of_the_directory(runner: Runner, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("from the workspace\n")
    app = AppDef(
        name="ws", roles=[Role(name="cat", image="/", entrypoint="cat", args=["data.txt"])]
    )
    handle = runner.run(app, "local_cwd", workspace=str(ws))
    st = runner.wait(handle, wait_interval=0.05, timeout=60)
    assert st is not None and st.state == AppState.SUCCEEDED, st
    assert list(runner.log_lines(handle, "cat", 0)) == ["from the workspace\n"]


TRAIN = textwrap.dedent(
    """
    import os
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torchx_core.distributed as tdist
    from torchx_core.runtime.tracking import FsspecResultTracker

    # before the process group: the helpers read torchrun's environment, without torch
    env_view = (tdist.rank(), tdist.world_size(), tdist.local_rank(), tdist.is_local_rank0())
    device = tdist.init_pg("gloo")
    rank, world = tdist.rank(), tdist.world_size()
    out = os.environ["RESULTS_DIR"]
    node = os.environ["TORCHX_REPLICA_IDX"]
    # rank 0 prepares the "dataset" first; every other rank reads it complete
    with tdist.on_rank0_first():
        path = os.path.join(out, "dataset.txt")
        if tdist.is_rank0():
            with open(path + ".part", "w") as f:
                f.write("\\n".join(str(i) for i in range(1000)))
            os.rename(path + ".part", path)
        saw_dataset = os.path.exists(path)
    # each node's local rank 0 prepares a node-local file first
    with tdist.on_local_rank0_first():
        node_file = os.path.join(out, f"node{node}.txt")
        if tdist.is_local_rank0():
            with open(node_file, "w") as f:
                f.write(f"prepared by rank {rank}")
        saw_node_file = os.path.exists(node_file)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    losses = []
    for step in range(60):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # every rank holds the same weights after DDP's gradient all-reduce
    w = model.module.weight.detach().clone()
    ws = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(ws, w)
    same = all(torch.allclose(w, o) for o in ws)
    FsspecResultTracker(out)[f"rank{rank}"] = {
        "env_rank": env_view[0], "env_world": env_view[1], "local_rank": env_view[2],
        "local_rank0": str(env_view[3]), "device": str(device), "node": node,
        "saw_dataset": str(saw_dataset), "saw_node_file": str(saw_node_file),
        "last_loss": losses[-1],
    }
    print(f"rank={rank} world_size={world} node={node}"
          f" first_loss={losses[0]:.4f} last_loss={losses[-1]:.4f} in_sync={same}", flush=True)
    dist.destroy_process_group()
    """
)


def test_ddp_2x2_trains_a_tiny_model_on_cpu(runner: Runner, tmp_path: Path) -> None:
    """A real 2 nodes x 2 procs DDP job using torchx_core.distributed and runtime.tracking."""
    from torchx_core.runtime.tracking import FsspecResultTracker

    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    results = tmp_path / "results"
    results.mkdir()
    env = {"OMP_NUM_THREADS": "1", "RESULTS_DIR": str(results)}
    app = ddp(script=str(script), j="2x2", rdzv_port=free_port(), env=env)
    handle = runner.run(app, "local_cwd")
    st = runner.wait(handle, wait_interval=0.2, timeout=300)
    logs = {k: "".join(runner.log_lines(handle, "train", k)) for k in range(2)}
    assert st is not None and st.state == AppState.SUCCEEDED, (st, logs)
    results_lines = [
        line for text in logs.values() for line in text.splitlines() if "world_size=" in line
    ]
    assert len(results_lines) == 4, logs
    ranks = sorted(int(line.split("rank=")[1].split()[0]) for line in results_lines)
    assert ranks == [0, 1, 2, 3]
    for line in results_lines:
        fields = dict(part.split("=") for part in line.split("]")[-1].split() if "=" in part)
        assert fields["world_size"] == "4"
        assert fields["in_sync"] == "True"
        assert float(fields["last_loss"]) < float(fields["first_loss"]) / 10
    assert parse_app_handle(handle).app_id.startswith("train-")
    # what each rank recorded through FsspecResultTracker, read back by key
    tracker = FsspecResultTracker(str(results))
    recorded = {r: tracker[f"rank{r}"] for r in range(4)}
    assert tracker["rank4"] == {}
    for r, res in recorded.items():
        assert (res["env_rank"], res["env_world"]) == (r, 4)
        assert res["device"] == "cpu"
        assert res["saw_dataset"] == "True" and res["saw_node_file"] == "True"
        assert res["local_rank0"] == str(res["local_rank"] == 0)
    assert sorted((res["node"], res["local_rank"]) for res in recorded.values()) == [
        ("0", 0),
        ("0", 1),
        ("1", 0),
        ("1", 1),
    ]
    assert (results / "dataset.txt").read_text().count("\n") == 999
    assert sorted(p.name for p in results.glob("node*.txt")) == ["node0.txt", "node1.txt"]


def test_batched_watchers_each_see_their_own_app(runner: Runner, tmp_path: Path) -> None:
    """Watchers sharing batched reads on the real local scheduler: apps that end at different
    times each reach their own final state, and an app that vanishes does not affect the others."""
    import threading

    def app(name: str, script: str) -> AppDef:
        return AppDef(
            name, roles=[Role(name="r", image=str(tmp_path), entrypoint="sh", args=["-c", script])]
        )

    release = tmp_path / "release"
    wait_release = f"while [ ! -e {release} ]; do sleep 0.05; done"
    handles = {
        "quick": runner.run(app("quick", "exit 0"), scheduler="local_cwd"),
        "fails": runner.run(app("fails", f"{wait_release}; exit 3"), scheduler="local_cwd"),
        "slow": runner.run(app("slow", f"{wait_release}; sleep 0.5"), scheduler="local_cwd"),
        "vanishes": runner.run(app("vanishes", "sleep 600"), scheduler="local_cwd"),
    }
    seen: dict[str, list[Any]] = {k: [] for k in handles}
    done = threading.Event()

    errors: dict[str, BaseException] = {}

    def watch(key: str) -> None:
        h = handles[key]
        runner.watch(h)
        try:
            while not done.is_set():
                s = runner.watch_status(h, max_age=0.05)
                state = None if s is None else s.state
                if not seen[key] or seen[key][-1] != state:
                    seen[key].append(state)
                # ("vanishes" is deleted: it may read CANCELLED first, then gone)
                if state is None or (is_terminal(state) and key != "vanishes"):
                    return
                done.wait(0.02)
        except Exception as e:  # noqa: BLE001 - reported by the waits below
            errors[key] = e
        finally:
            runner.unwatch(h)

    threads = [threading.Thread(target=watch, args=(k,)) for k in handles]
    for t in threads:
        t.start()

    def what() -> str:
        return f"seen {seen}, errors {errors}"

    _wait_until(lambda: seen["quick"][-1:] == [AppState.SUCCEEDED], what)
    # (a loaded machine may take a while to start the others' replicas)
    _wait_until(lambda: all(seen[k][-1:] == [AppState.RUNNING] for k in ("fails", "slow")), what)
    runner.delete(handles["vanishes"])  # gone from the scheduler while watched
    _wait_until(lambda: seen["vanishes"][-1:] == [None], what)
    assert seen["fails"][-1] == AppState.RUNNING and seen["slow"][-1] == AppState.RUNNING
    release.touch()
    for t in threads:
        t.join(120)
    done.set()
    assert seen["quick"][-1] == AppState.SUCCEEDED
    assert seen["fails"][-1] == AppState.FAILED
    assert seen["slow"][-1] == AppState.SUCCEEDED
    assert seen["vanishes"][-1] is None
    assert AppState.RUNNING in seen["slow"]  # it was seen running, then succeeded


def _wait_until(cond: Any, what: Any = lambda: "", timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout:g} s: {what()}")
        time.sleep(0.02)
