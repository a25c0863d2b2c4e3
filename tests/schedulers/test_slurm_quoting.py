"""Property test: every argument and env value reaches the job exactly (no shell injection).

The generated batch script runs under bash with stub ``srun``/``scontrol`` programs on PATH.
The ``srun`` stub behaves like the real one where it matters: it splits its argv on bare ``:``
words into het groups, drops its own ``--options`` and execs the rest, so the script's quoting,
the ``env`` prefix and the ``:`` escaping are all exercised. The replica's entrypoint dumps its
argv and environment, NUL-separated, and the test compares them with the expected values.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path
from string import Template

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchx_core import specs
from torchx_core.schedulers.slurm.scheduler import SlurmScheduler, StaticSlurmProbe

SRUN_STUB = r"""#!/bin/bash
group=0; part=()
run() {
  local i=0
  while [[ "${part[$i]}" == --* ]]; do i=$((i+1)); done
  TEST_GROUP=$group "${part[@]:$i}"
}
for w in "$@"; do
  if [ "$w" = ":" ]; then run; group=$((group+1)); part=(); else part+=("$w"); fi
done
run
"""
SCONTROL_STUB = "#!/bin/bash\necho 'NodeName=node1 Arch=x86_64 NodeAddr=10.9.8.7 NodeHostName=h'\n"
DUMP_STUB = r"""#!/bin/bash
: > "$DUMP_DIR/$TEST_GROUP.argv"
[ $# -eq 0 ] || printf '%s\0' "$@" > "$DUMP_DIR/$TEST_GROUP.argv"
printf '%s\0' "$V1" "$V2" "$TORCHX_RANK0_HOST" > "$DUMP_DIR/$TEST_GROUP.env"
"""
HOSTILE = [
    ":",
    "\\:",
    "\\\\:",
    "::",
    "--het-group=1",
    "-",
    "=",
    "a=b",
    "$SLURM_JOB_ID",
    "${app_id}",
    "$${app_id}",
    "$$",
    "`id`",
    "$(id)",
    "'",
    '"',
    "\\",
    "\n",
    "\t",
    " ",
    "",
    "ünï©ødé ✓",
    "*",
    "~",
    "!",
    "#",
    ";",
    "&",
    "|",
    "<",
    ">",
    "%j",
    "\r\n",
]
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
WORD = st.one_of(st.sampled_from(HOSTILE), TEXT)


def _stub_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="slurm-stubs-"))
    for name, body in (("srun", SRUN_STUB), ("scontrol", SCONTROL_STUB), ("dump", DUMP_STUB)):
        p = d / name
        p.write_text(body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return d


STUBS = _stub_dir()


def expected(value: str, replica_id: int) -> str:
    return Template(value).safe_substitute(
        img_root="",
        app_id="4242",
        replica_id=str(replica_id),
        rank0_env="TORCHX_RANK0_HOST",
        base_img_root="DEPRECATED",
    )


def run_script(
    args: list[str], v1: str, v2: str, replicas: int
) -> dict[int, tuple[list[str], list[str]]]:
    app = specs.AppDef(
        "q",
        roles=[
            specs.Role(
                "r",
                image="",
                entrypoint=str(STUBS / "dump"),
                args=args,
                env={"V1": v1, "V2": v2},
                num_replicas=replicas,
                resource=specs.Resource(1, 0, 10),
            )
        ],
    )
    with tempfile.TemporaryDirectory() as dump_dir:
        sched = SlurmScheduler("t", run_cmd=None, probe=StaticSlurmProbe((22, 5)))
        script = str(sched.submit_dryrun(app, {"job_dir": dump_dir}))
        path = Path(dump_dir) / "job.sh"
        path.write_text(script)
        env = {
            "PATH": f"{STUBS}:{os.environ['PATH']}",
            "SLURM_JOB_ID": "4242",
            "SLURMD_NODENAME": "node1",
            "DUMP_DIR": dump_dir,
            "V1": "outer",
            "V2": "outer",
        }
        proc = subprocess.run(
            ["bash", str(path)], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        out = {}
        for g in range(replicas):
            argv = (Path(dump_dir) / f"{g}.argv").read_bytes().decode().split("\0")[:-1]
            envs = (Path(dump_dir) / f"{g}.env").read_bytes().decode().split("\0")[:-1]
            out[g] = (argv, envs)
        return out


def check(args: list[str], v1: str, v2: str, replicas: int) -> None:
    got = run_script(args, v1, v2, replicas)
    assert sorted(got) == list(range(replicas))
    for k, (argv, envs) in got.items():
        assert argv == [expected(a, k) for a in args]
        assert envs == [expected(v1, k), expected(v2, k), "10.9.8.7"]


def test_hostile_strings_reach_the_job_exactly() -> None:
    check(HOSTILE, "x'y\"z $P `q`\n:", ":", replicas=2)
    check([":"], "", "", replicas=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.lists(WORD, max_size=6), v1=WORD, v2=WORD, replicas=st.integers(1, 2))
def test_generated_script_round_trips_any_text(
    args: list[str], v1: str, v2: str, replicas: int
) -> None:
    check(args, v1, v2, replicas)
