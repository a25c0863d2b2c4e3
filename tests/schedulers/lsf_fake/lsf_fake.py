"""A fake IBM Spectrum LSF for tests: `bsub`, `bjobs`, `bkill` backed by a JSON job table.

The wrappers next to this file (bsub, bjobs, bkill) exec it; put this folder on PATH and set
LSF_FAKE_DIR to a scratch directory. `lsf_fake.py run` (a test control, not an LSF command) runs
every pending job concurrently with /bin/sh, as LSF would on an execution host.

Output formats, from IBM Spectrum LSF 10.1.0 documentation:
* bsub:  "Job <1234> is submitted to queue <normal>." / "... to default queue <normal>."
  (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=bsub-command)
* bjobs -o "jobid stat exit_code job_name exec_host output_file" -json: an object
  {"COMMAND": "bjobs", "JOBS": n, "RECORDS": [{"JOBID": "...", "STAT": "...", ...}]} whose keys
  are the upper-cased field names; values are strings; a lookup miss is a record
  {"ERROR": "Job <x> is not found"} (exit code 255)
  (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=information-viewing-in-json-format,
   https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=bjobs-o)
* bjobs -a -w (classic table): "JOBID USER STAT QUEUE FROM_HOST EXEC_HOST JOB_NAME SUBMIT_TIME",
  EXEC_HOST blank while pending, SUBMIT_TIME like "Oct 22 10:02"; "No job found" on stderr when
  nothing matches (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=reference-bjobs)
* bkill: "Job <1234> is being terminated"; "Job <1234>: Job has already finished"
  (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=reference-bkill); a killed job ends in
  EXIT with exit code 130.
LSF_FAKE_NO_JSON=1 makes bjobs behave like a release without -json (usage error, exit 255).
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import subprocess
import sys
from contextlib import contextmanager


def _state_file() -> str:
    # read at each call: the tests also run these commands in-process (see ``main``)
    return os.path.join(os.environ.get("LSF_FAKE_DIR", "/tmp/lsf-fake"), "jobs.json")


@contextmanager
def table(write: bool = True):
    state = _state_file()
    os.makedirs(os.path.dirname(state), exist_ok=True)
    with open(state + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = {"next": 1000, "jobs": {}}
        if os.path.exists(state):
            with open(state) as f:
                data = json.load(f)
        yield data
        if write:
            with open(state + ".tmp", "w") as f:
                json.dump(data, f)
            os.replace(state + ".tmp", state)


def bsub(args: list[str]) -> int:
    with_value = {"-J", "-cwd", "-o", "-e", "-q", "-n", "-R", "-gpu"}
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] in with_value:
        opts[args[i]] = args[i + 1]
        i += 2
    command = args[i:]
    if len(command) != 1:
        print(f"fake bsub: expected one command string, got {command!r}", file=sys.stderr)
        return 255
    with table() as t:
        job_id = str(t["next"])
        t["next"] += 1
        t["jobs"][job_id] = {
            "id": job_id,
            "name": opts.get("-J", ""),
            "stat": "PEND",
            "exit_code": "",
            "queue": opts.get("-q", "normal"),
            "cwd": opts.get("-cwd", os.getcwd()),
            "out": opts.get("-o", ""),
            "host": "",
            "command": command[0],
            "opts": opts,
        }
    where = f"queue <{opts['-q']}>" if "-q" in opts else "default queue <normal>"
    print(f"Job <{job_id}> is submitted to {where}.")
    return 0


def _selected(jobs: dict, args: list[str]) -> list[dict]:
    pattern = args[args.index("-J") + 1] if "-J" in args else None
    ids = [a for a in args if a.isdigit()]
    out = [
        j
        for j in jobs.values()
        if (pattern is None or fnmatch.fnmatchcase(j["name"], pattern))
        and (not ids or j["id"] in ids)
    ]
    if "-a" not in args:
        out = [j for j in out if j["stat"] not in ("DONE", "EXIT")]
    return out


def bjobs(args: list[str]) -> int:
    if "-json" in args and os.environ.get("LSF_FAKE_NO_JSON") == "1":
        print(
            "bjobs: illegal option -- json\nUsage: bjobs [-h] [-V] [-A] [-a] [-aps] [-w] ...",
            file=sys.stderr,
        )
        return 255
    with table(write=False) as t:
        jobs = _selected(t["jobs"], args)
    if "-json" in args:
        fields = args[args.index("-o") + 1].split()
        records = []
        for j in jobs:
            values = {
                "jobid": j["id"],
                "stat": j["stat"],
                "exit_code": str(j["exit_code"]),
                "job_name": j["name"],
                "exec_host": j["host"],
                "output_file": j["out"],
            }
            records.append({f.upper(): values[f] for f in fields})
        if not records:
            records = [{"ERROR": "No job found"}]
        print(json.dumps({"COMMAND": "bjobs", "JOBS": len(jobs), "RECORDS": records}, indent=2))
        return 0 if jobs else 255
    if not jobs:
        print("No job found", file=sys.stderr)
        return 255
    print(
        f"{'JOBID':<8}{'USER':<8}{'STAT':<6}{'QUEUE':<11}{'FROM_HOST':<12}{'EXEC_HOST':<12}"
        f"{'JOB_NAME':<11}SUBMIT_TIME"
    )
    for j in jobs:
        print(
            f"{j['id']:<8}{'alice':<8}{j['stat']:<6}{j['queue']:<11}{'hostA':<12}"
            f"{j['host']:<12}{j['name']} Oct 22 10:02"
        )
    return 0


def bkill(args: list[str]) -> int:
    rc = 0
    with table() as t:
        for job_id in args:
            job = t["jobs"].get(job_id)
            if job is None:
                print(f"Job <{job_id}>: No matching job found", file=sys.stderr)
                rc = 255
            elif job["stat"] in ("DONE", "EXIT"):
                print(f"Job <{job_id}>: Job has already finished", file=sys.stderr)
                rc = 255
            else:
                job["stat"], job["exit_code"] = "EXIT", 130
                print(f"Job <{job_id}> is being terminated")
    return rc


def run() -> int:
    """Test control: run every pending job (concurrently) to completion."""
    with table() as t:
        pending = [j for j in t["jobs"].values() if j["stat"] == "PEND"]
        for j in pending:
            j["stat"], j["host"] = "RUN", "hostB"
    procs = []
    for j in pending:
        env = {**os.environ, "LSB_JOBID": j["id"], "LSB_JOBNAME": j["name"]}
        with open(j["out"] or os.devnull, "a") as out:
            procs.append(
                (
                    j,
                    subprocess.Popen(
                        ["/bin/sh", "-c", j["command"]],
                        cwd=j["cwd"],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    ),
                )
            )
    for j, p in procs:
        rc = p.wait(timeout=60)
        with table() as t:
            t["jobs"][j["id"]].update(
                stat="DONE" if rc == 0 else "EXIT", exit_code="" if rc == 0 else rc
            )
    return 0


def main(argv: list[str]) -> int:
    """Runs one command (``bsub``/``bjobs``/``bkill`` + its arguments, or ``run``)."""
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":
        return run()
    return {"bsub": bsub, "bjobs": bjobs, "bkill": bkill}[cmd](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
