"""``Scheduler.submit_order`` of the backends that reconcile racing attaches (unit)."""

from __future__ import annotations

from torchx_core.schedulers.kubernetes import _pods
from torchx_core.schedulers.local.scheduler import create_scheduler as create_local
from torchx_core.schedulers.slurm.scheduler import create_scheduler as create_slurm


def test_slurm_orders_by_job_id_not_by_text() -> None:
    assert create_slurm("t").submit_order(["100", "99", "1000"]) == ["99", "100", "1000"]
    assert create_slurm("t").submit_order([]) == []


def test_kubernetes_orders_by_creation_then_id_and_puts_gone_objects_last() -> None:
    objs = {
        "ns:b": {"metadata": {"creationTimestamp": "2026-11-26T10:00:01Z"}},
        "ns:a": {"metadata": {"creationTimestamp": "2026-11-26T10:00:01Z"}},
        "ns:c": {"metadata": {"creationTimestamp": "2026-11-26T09:59:59Z"}},
    }
    assert _pods.by_creation(["ns:gone", "ns:b", "ns:a", "ns:c"], objs.get) == [
        "ns:c",
        "ns:a",
        "ns:b",
        "ns:gone",
    ]


def test_local_locks_names_and_does_not_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sched = create_local("t", root=str(tmp_path))
    assert sched.submit_order([]) is None
    with sched.name_lock("train-0123456789") as held:
        assert held is True
