"""A kfp.local launcher step on ``aws_batch`` (the moto server on loopback) with an int run option.

Issue 13, fault 3: run options used to travel as a KFP ``dict`` parameter, where numbers become
doubles, so ``cfg={"priority": 5}`` reached the scheduler as ``5.0`` and the step failed with
"must be of type: int". Moto runs the Batch job as a real busybox container on the local dockerd.
"""

# No `from __future__ import annotations`: KFP reads pipeline annotations as objects.

from pathlib import Path
from typing import Any

import pytest
from kfp import dsl
from kfp_helpers import batch_app

from torchx_kfp import launch

pytestmark = [pytest.mark.integration, pytest.mark.kfp, pytest.mark.aws]


def test_int_run_option_reaches_aws_batch_as_an_int(
    kfp_local: Path, moto_batch_queue: tuple[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    queue, batch = moto_batch_queue
    app = batch_app("kfpbatch", "batch says hi")

    @dsl.pipeline(name="kfp-aws-batch")
    def pipeline() -> str:
        step = launch(
            app, scheduler="aws_batch", cfg={"queue": queue, "priority": 5}, wait_interval=0.5
        )
        return step.outputs["state"]

    assert pipeline().output == "SUCCEEDED"
    (job,) = [
        j
        for j in batch.list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
        if j["jobName"].startswith("kfpbatch-")
    ]
    (described,) = batch.describe_jobs(jobs=[job["jobId"]])["jobs"]
    assert described["status"] == "SUCCEEDED"
    out = capfd.readouterr().out
    assert "batch says hi" in out  # the job's CloudWatch log streamed into the step log
