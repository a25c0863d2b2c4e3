"""The one app-id builder (``schedulers/_app_ids.py``) and each backend's rules."""

from __future__ import annotations

import re

import pytest

from torchx_core.schedulers._app_ids import IdRules, unique_id
from torchx_core.schedulers.aws.batch import JOB_NAME_RULES as BATCH
from torchx_core.schedulers.aws.sagemaker import JOB_NAME_RULES as SAGEMAKER
from torchx_core.schedulers.docker.scheduler import APP_ID_RULES as DOCKER
from torchx_core.schedulers.kubernetes import _pods as _k8s_pods
from torchx_core.schedulers.local.scheduler import APP_ID_RULES as LOCAL
from torchx_core.schedulers.lsf.scheduler import APP_ID_RULES as LSF
from torchx_core.schedulers.ray.scheduler import SUBMISSION_ID_RULES as RAY

NAMES = ["trainer", "My App/Train v2", "-._weird_.-", "ünï ✓", "", "x" * 300, "a b\nc;$(id)"]

# backend -> (rules, what the service accepts, longest id): written from each service's docs
CASES = {
    "aws_batch": (BATCH, r"[A-Za-z0-9][A-Za-z0-9_-]*", 128),
    "aws_sagemaker": (SAGEMAKER, r"[a-zA-Z0-9](-*[a-zA-Z0-9])*", 63),
    "ray": (RAY, r"[a-zA-Z0-9][a-zA-Z0-9_-]*", 128),
    "local_docker": (DOCKER, r"[a-z0-9][a-z0-9_.-]*", 64),
    "kubernetes": (_k8s_pods.NAME_RULES, r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", 63),
    "lsf": (LSF, r"[a-z0-9][a-z0-9_]*", 64),
    "local": (LOCAL, r"[A-Za-z0-9][A-Za-z0-9_.-]*", 255),
}


@pytest.mark.parametrize("backend", sorted(CASES))
@pytest.mark.parametrize("name", NAMES)
def test_ids_are_valid_for_their_backend(backend: str, name: str) -> None:
    rules, pattern, longest = CASES[backend]
    app_id = unique_id(name, rules)
    assert re.fullmatch(pattern, app_id), app_id
    assert len(app_id) <= longest


def test_ids_are_unique_and_keep_a_readable_name() -> None:
    ids = {unique_id("My App", DOCKER) for _ in range(2000)}
    assert len(ids) == 2000
    assert all(i.startswith("my-app-") and len(i) == len("my-app-") + 8 for i in ids)


def test_rules_clean_literally() -> None:
    assert (
        IdRules(allowed="a-z0-9_", max_name_len=40, lower=True, sep="_").clean("Train Job-2")
        == "train_job_2"
    )
    assert IdRules(allowed="A-Za-z0-9_-", max_name_len=5).clean("--abcdefgh") == "abcde"
    assert IdRules(allowed="a-z0-9-", max_name_len=43, lower=True, fallback="x").clean("✓") == "x"
    assert _k8s_pods.unique_name("Trainer").startswith("trainer-")
    assert len(_k8s_pods.unique_name("t")) == len("t-") + 10


def test_public_ids_module_as_torchx() -> None:
    """torchx_core.schedulers.ids: TorchX's make_unique / random_id / random_uint64."""
    from torchx_core.schedulers import ids

    dns = re.compile(r"^[a-z][a-z0-9]*$")
    seen = {ids.random_id() for _ in range(200)}
    assert len(seen) == 200 and all(dns.match(i) for i in seen)
    assert all(len(ids.random_id(max_length=5)) <= 5 for _ in range(50))
    assert all(0 <= ids.random_uint64() < 2**64 for _ in range(50))
    name = ids.make_unique("train", 6)
    assert re.fullmatch(r"train-[a-z][a-z0-9]{5}", name), name
    assert ids.make_unique("train").startswith("train-") and ids.make_unique(
        "t"
    ) != ids.make_unique("t")
