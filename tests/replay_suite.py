#!/usr/bin/env python3
"""A stand-in for a built suite that REPLAYS a recorded suite output (no GPU): SUITE/recorded.jsonl,
the JSON lines one run of the suite printed (its system line, then each job's lines from job_start to
job_end), recorded by tests/test_cluster.py from tests/fake_suite.py. Copied to SUITE/build/benanza-suite.

``--system``: the recorded system line; ``--jobs FILE|-``: the system line, then each job's recorded
lines in the order the job ids come. Environment (set per Dask worker by the tests):
  REPLAY_GPU=<name>, REPLAY_UUID=<uuid>   the system record's GPU name and uuid
  REPLAY_HANG_ONCE=<job id>:<marker>      the first process to reach that job writes its parent's pid
                                          (the Dask worker) to <marker> and waits until that parent is
                                          gone, then exits (a worker killed mid-job)
  REPLAY_STARTS=<file>                    each --jobs process appends a line: its REPLAY_UUID and the
                                          GPU lock file it was given (BENANZA_GPU_LOCK, "-" for none)
"""
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def emit(line: str) -> None:
    sys.stdout.write(line if line.endswith("\n") else line + "\n")
    sys.stdout.flush()


def load():
    system, jobs, cur = None, {}, None
    for line in (ROOT / "recorded.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "system":
            system = rec
        elif rec["type"] == "job_start":
            cur = rec["job"]
            jobs[cur] = [line]
        elif cur is not None:
            jobs[cur].append(line)
    sysrec = dict(system["system"])
    sysrec["gpu_name"] = os.environ.get("REPLAY_GPU", sysrec["gpu_name"])
    sysrec["uuid"] = os.environ.get("REPLAY_UUID", sysrec["uuid"])
    return json.dumps(dict(system, system=sysrec)), jobs


def hang_if_first(jid: str) -> None:
    spec = os.environ.get("REPLAY_HANG_ONCE", "")
    job, _, marker = spec.partition(":")
    if job != jid:
        return
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return  # hung once already: this run goes through
    parent = os.getppid()
    os.write(fd, str(parent).encode())
    os.close(fd)
    while os.getppid() == parent:
        time.sleep(0.05)
    sys.exit(1)


def main(argv):
    system, jobs = load()
    emit(system)
    if "--system" in argv:
        return 0
    src = argv[argv.index("--jobs") + 1]
    if os.environ.get("REPLAY_STARTS"):
        with open(os.environ["REPLAY_STARTS"], "a") as f:
            f.write(f"{os.environ.get('REPLAY_UUID', '')} {os.environ.get('BENANZA_GPU_LOCK') or '-'}\n")
    ids = ((ln.strip() for ln in iter(sys.stdin.readline, "") if ln.strip()) if src == "-" else
           [ln for ln in Path(src).read_text().splitlines() if ln])
    for jid in ids:
        lines = jobs[jid]
        emit(lines[0])
        hang_if_first(jid)
        for line in lines[1:]:
            emit(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
