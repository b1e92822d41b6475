#!/usr/bin/env python3
"""A stand-in for a built benchmark suite, speaking its JSON-lines protocol without a GPU.

Copied to SUITE/build/benanza-suite by the tests. It reads SUITE/suite.json for the jobs and emits
plausible measurements (deterministic per job id). Behaviour switches (environment):
  FAKE_SUITE_CRASH=<job id>    die with SIGSEGV in the middle of that job
  FAKE_SUITE_HANG=<job id>     sleep forever in that job
  FAKE_SUITE_FATAL=<job id>    report a sticky CUDA error in that job and exit 4
  FAKE_SUITE_NODEVICE=1        behave like a machine without a GPU (exit 3)
  FAKE_SUITE_SLOW=<seconds>    sleep this long per job
  FAKE_SUITE_GPU=<name>        GPU name of the system record
  FAKE_SUITE_LOG=<path>        append '<job id> <device>' for every job started to this file
  FAKE_SUITE_MALFORMED=<job id> print one measurement of that job with a string where a time belongs
  FAKE_SUITE_LONG_NAME=<job id> give that job's first algorithm a cuDNN-like engine config name of
                               200 characters (longer than its column)
  --prior FILE                 as the harness (cpp/include/benanza/prior.hpp): a candidate of a job the
                               prior lists that is neither in its "time" list nor unknown to it ("known")
                               is recorded as skipped with the prior's message, and not timed
"""
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def emit(rec):
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def system():
    return {"index": 0, "gpu_name": os.environ.get("FAKE_SUITE_GPU", "Fake GPU"), "uuid": "GPU-fake",
            "pci_bus_id": "0000:00:00.0", "compute_capability": "9.0", "sm_count": 132,
            "memory_bytes": 150000000000, "l2_cache_bytes": 52428800, "memory_bus_width_bits": 6144,
            "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201, "current_sm_clock_mhz": 1980,
            "driver_cuda_version": 13000, "runtime_version": 13000, "driver_version": "580.0",
            "cudnn_version": 91900, "cublas_version": 130100, "nvml": True}


def fake_time(job, algo):
    h = int(hashlib.sha256(f"{job}/{algo}".encode()).hexdigest()[:8], 16)
    return 0.01 + (h % 1000) / 1000.0


def device_arg(argv) -> str:
    return argv[argv.index("--device") + 1] if "--device" in argv else "0"


def main(argv):
    manifest = json.loads((ROOT / "suite.json").read_text())
    jobs = manifest["jobs"]
    if "--list" in argv:
        for j in jobs:
            emit({"type": "job", "job": j["job"], "layer_key": j["layer_key"], "kind": j["kind"],
                  "precision": j["precision"]})
        return 0
    if os.environ.get("FAKE_SUITE_NODEVICE"):
        emit({"type": "fatal", "message": "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected"})
        return 3
    emit({"type": "system", "suite_model": "fake", "generator": "fake", "system": system()})
    if "--system" in argv:
        return 0
    wanted = None
    if "--jobs" in argv:
        src = argv[argv.index("--jobs") + 1]
        # "-": job ids on standard input, one line each as the runner hands them out (as the suite)
        wanted = ((ln.strip() for ln in iter(sys.stdin.readline, "") if ln.strip()) if src == "-" else
                  [ln for ln in Path(src).read_text().splitlines() if ln])
    prior = json.loads(Path(argv[argv.index("--prior") + 1]).read_text())["jobs"] if "--prior" in argv else {}
    prior_message = json.loads(Path(argv[argv.index("--prior") + 1]).read_text())["message"] if prior else ""
    by_id = {j["job"]: j for j in jobs}
    for jid in (wanted if wanted is not None else list(by_id)):
        j = by_id[jid]
        emit({"type": "job_start", "job": jid})
        if os.environ.get("FAKE_SUITE_LOG"):
            device = argv[argv.index("--device") + 1] if "--device" in argv else "0"
            with open(os.environ["FAKE_SUITE_LOG"], "a") as f:
                f.write(f"{jid} {device}\n")
        if os.environ.get("FAKE_SUITE_LOCK_LOG"):  # the GPU lock this worker was given (harness.hpp)
            with open(os.environ["FAKE_SUITE_LOCK_LOG"], "a") as f:
                f.write(os.environ.get("BENANZA_GPU_LOCK", "-") + "\n")
        if os.environ.get("FAKE_SUITE_SLOW") and os.environ.get("FAKE_SUITE_SLOW_DEVICE", device_arg(argv)) == \
                device_arg(argv):
            time.sleep(float(os.environ["FAKE_SUITE_SLOW"]))
        algos = ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "WINOGRAD"] if j["kind"] in ("Conv", "ConvBiasAct") \
            else ["DEFAULT"]
        dtype = {"fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3"}.get(j["precision"], "float32")
        tc = j["kind"] in ("Conv", "ConvBiasAct", "Gemm", "RNN")
        math = {"fp32": "fma", "tf32": "tf32", "fp16": "tensor_op", "bf16": "tensor_op",
                "fp8": "fp8"}[j["precision"]] if tc else "none"
        for i, a in enumerate(algos):
            if jid == os.environ.get("FAKE_SUITE_LONG_NAME") and i == 0:
                a = ("eng29" + "".join(f"_k{k}={k % 7}" for k in range(2, 60)))[:200]
            base = {"type": "measurement", "job": jid, "layer_key": j["layer_key"], "kind": j["kind"],
                    "precision": j["precision"], "call": "fake" + j["kind"], "algorithm": a, "math": math,
                    "dtype": dtype, "workspace_bytes": 0}
            if j.get("layout", "NCHW") != "NCHW":
                base["layout"] = j["layout"]  # as the harness emits it
            if jid == os.environ.get("FAKE_SUITE_CRASH") and i == 1:
                os.kill(os.getpid(), signal.SIGSEGV)
            if jid == os.environ.get("FAKE_SUITE_HANG") and i == 1:
                time.sleep(3600)
            if jid == os.environ.get("FAKE_SUITE_FATAL") and i == 1:
                emit({"type": "fatal", "message": f"job {jid}: sticky CUDA error: cudaErrorIllegalAddress"})
                return 4
            pj = prior.get(jid)
            if pj is not None and [base["call"], a] not in pj["time"] and [base["call"], a] in pj["known"]:
                emit(dict(base, cache="warm", status="skipped", message=prior_message))
                continue
            if a == "WINOGRAD":
                emit(dict(base, cache="warm", status="not_supported", message="CUDNN_STATUS_NOT_SUPPORTED"))
                continue
            t = fake_time(jid, a)
            if jid == os.environ.get("FAKE_SUITE_MALFORMED") and i == 0:
                emit(dict(base, cache="warm", status="ok", median_ms="0.5 ms"))
                continue
            for cache, f in (("warm", 1.0), ("cold", 1.3)):
                emit(dict(base, cache=cache, status="ok", method="cuda_graph", reps=10, host_us=5.0,
                          median_ms=t * f, q1_ms=t * f * 0.99, q3_ms=t * f * 1.01, mean_ms=t * f, min_ms=t * f * 0.98,
                          max_ms=t * f * 1.05, stddev_ms=t * f * 0.01, rse=0.004, samples=20, converged=True,
                          dropped=0, sm_clock_min_mhz=1980, sm_clock_max_mhz=1980))
        if j["kind"] == "Conv":
            emit({"type": "choice", "job": jid, "layer_key": j["layer_key"], "kind": "Conv",
                  "precision": j["precision"], "source": "cudnnGetConvolutionForwardAlgorithm_v7", "rank": 0,
                  "algorithm": "IMPLICIT_GEMM", "math": math, "status": "ok", "workspace_bytes": 0})
        emit({"type": "job_end", "job": jid, "status": "ok", "message": ""})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
