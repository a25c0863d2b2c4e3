"""One error tree for the schedulers, and one rule for app ids a backend cannot have issued."""

from __future__ import annotations

from typing import Any

import pytest

from torchx_core.schedulers.api import InvalidAppIdError, SchedulerError
from torchx_core.schedulers.aws.batch import AWSBatchScheduler
from torchx_core.schedulers.kubernetes._client import KubernetesApiError
from torchx_core.schedulers.kubernetes.mcad import create_scheduler as create_mcad
from torchx_core.schedulers.kubernetes.scheduler import create_scheduler as create_k8s
from torchx_core.schedulers.ray.scheduler import RayScheduler
from torchx_core.specs.errors import TorchXError, UnknownAppException


class Untouchable:
    """A client that fails the test if the scheduler talks to its service at all."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the service was asked ({name}) about an impossible app id")


def schedulers() -> dict[str, tuple[Any, str, str]]:
    """backend -> (scheduler, an id it cannot have issued, words of the expected form)."""
    return {
        "aws_batch": (
            AWSBatchScheduler("t", client=Untouchable()),
            "no-queue-part",
            "<job queue>:<job name>",
        ),
        "ray": (RayScheduler("t", client=Untouchable()), "no-address", "<dashboard host:port>"),
        "kubernetes": (
            create_k8s("t", client=Untouchable()),
            ":no-namespace",
            "<namespace>:<name>",
        ),
        "kubernetes_mcad": (create_mcad("t", client=Untouchable()), "ns:", "<namespace>:<name>"),
    }


@pytest.mark.parametrize("backend", sorted(schedulers()))
def test_looking_up_an_impossible_id_is_none_everywhere(backend: str) -> None:
    sched, bad, _ = schedulers()[backend]
    assert sched.describe(bad) is None
    assert sched.describe_many([bad]) == {bad: None}
    assert sched.exists(bad) is False
    sched.cancel(bad)  # idempotent on an app that cannot exist


@pytest.mark.parametrize("backend", ["aws_batch", "kubernetes", "ray"])  # (mcad has no logs)
def test_acting_on_an_impossible_id_says_the_expected_form(backend: str) -> None:
    sched, bad, form = schedulers()[backend]
    with pytest.raises(InvalidAppIdError) as info:
        list(sched.log_iter(bad, "role", 0))
    assert form in str(info.value) and repr(bad) in str(info.value)
    assert isinstance(info.value, UnknownAppException)  # handled like any unknown app
    assert isinstance(info.value, SchedulerError) and isinstance(info.value, ValueError)
    assert info.value.app_handle == bad


def test_backend_errors_are_scheduler_errors() -> None:
    err = KubernetesApiError("forbidden", status=403)
    assert isinstance(err, SchedulerError) and isinstance(err, TorchXError)
    assert isinstance(err, RuntimeError) and err.status == 403
