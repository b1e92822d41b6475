"""The framework's own kernels as lower-bound candidates: each layer config and fusion candidate
timed as PyTorch runs it (the ATen call for its shapes, data type and memory format).

Frameworks run many kernels of their own (flash attention, LayerNorm, reductions, depthwise
convolutions, GEMMs with bias epilogues), and a bound that ignores them can be above what the
framework runs (docs/design.md, "Definitions": layer time). Every config kind of :data:`benanza.kinds.CONFIG_KINDS`
has a builder here (:data:`BUILDERS`) that allocates random inputs on the GPU and returns the
callable PyTorch eager would run: ``F.conv2d`` in either memory format, ``F.linear`` with its bias,
``F.layer_norm``, ``F.scaled_dot_product_attention`` on strided views, reductions, elementwise ops,
``torch.cat``... Each is timed with the harness's method (cpp/include/benanza/harness.hpp): a first
call whose output is checked (finite values, the config's element count), warm-up, ``reps``
back-to-back calls captured in a CUDA graph and replayed between CUDA events, sampling until the
relative standard error of the median is under ``--rse`` (with at least ``--min-samples`` and a time
cap), ``torch.backends.cudnn.benchmark = True``; cold samples flush the L2 first. Measurements are
ordinary database rows of backend ``torch_eager`` (:class:`benanza.kinds.backend.Backend`, each
record's ``backend``), named ``torch:<ATen op>`` (e.g. ``torch:aten::layer_norm``), so the analyzer's
per-config minimum takes them; ``analyze`` lists where they beat every library call.

Run as a worker (``python -m benanza.profiles.torch_candidates --jobs FILE [timing flags of the suite]``) it
speaks the generated suite's protocol (JSON lines ``job_start``, ``measurement``, ``job_end``,
``fatal`` on stdout; exit code 3 when PyTorch or a CUDA device is missing), so
:mod:`benanza.runner.run` drives it like a suite. The jobs file holds one JSON object per line: ``job``,
``kind``, ``params`` (:meth:`benanza.kinds.LayerConfig.params`), ``precision``, ``layout``.
Precisions: ``fp32`` = float32 with TF32 off for cuDNN and matmuls (math ``fma``), ``tf32`` = on
(``tf32``), ``fp16``/``bf16`` (``tensor_op``); kinds without Tensor Core math record ``none``;
``fp8`` has no PyTorch eager path and is recorded ``not_supported``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import dataclasses
from dataclasses import dataclass
from typing import Callable

from benanza import kinds as L
from benanza.kinds.backend import Backend
from benanza.kinds.framework import CALL_PREFIX, Candidate, Ctx, NotSupported  # noqa: F401 (CALL_PREFIX: this module's API)
from benanza.spec import PRECISION_TABLE as TABLE, TIMING


# ------------------------------------------------------------------------------- the builders


#: every config kind's builder, from the kinds' registry (:attr:`benanza.kinds.base.Kind.torch`)
BUILDERS: dict[str, Callable[[Ctx], Candidate]] = {name: kind.torch for name, kind in L.REGISTRY.items()}


def math_mode(cfg: L.LayerConfig, precision: str) -> str:
    """The math mode a candidate records (:data:`benanza.kinds.ACCEPTED_MATH`)."""
    if not cfg.tensor_cores:
        return "none"
    return {"fp32": "fma", "tf32": "tf32"}.get(precision, "tensor_op")


def build(cfg: L.LayerConfig, precision: str, layout: str = "NCHW", device: str = "cpu") -> Candidate:
    """The candidate of ``cfg`` in ``precision`` (``fp32``: TF32 off; ``tf32``: on) and ``layout``
    (NHWC: channels-last image tensors), its inputs allocated on ``device``. Sets PyTorch's TF32
    flags for the precision. Raises :class:`NotSupported` (fp8, an op without a PyTorch call) and
    KeyError for a kind without a builder."""
    import torch

    if not (precision in TABLE and TABLE[precision].torch_dtype):
        raise NotSupported(f"{precision}: no PyTorch eager path")
    if precision in ("fp32", "tf32"):
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    ctx = Ctx(cfg, torch, torch.device(device), getattr(torch, TABLE[precision].torch_dtype), layout == "NHWC")
    with torch.inference_mode():
        return BUILDERS[cfg.kind](ctx)


# --------------------------------------------------------------------------------------- timing

@dataclass
class Policy:
    """The harness's timing policy (RunOptions / the suite's flags), in ms and counts; the defaults
    are :data:`benanza.spec.TIMING`'s."""

    warmup_ms: float = TIMING.warmup_ms
    sample_ms: float = TIMING.sample_ms
    rse: float = TIMING.rse
    min_samples: int = TIMING.min_samples
    max_samples: int = TIMING.max_samples
    max_time_ms: float = TIMING.max_time_ms
    cold: str = TIMING.cold  # contenders | all | none (benanza.spec.COLD_POLICIES)
    graphs: bool = True
    max_reps: int = 1000
    contenders_within: float = 0.05
    profile: bool = False  # the worker's own wall ms per phase in the records (cost_ms) and job_end
    cold_max_time_ms: float = 0.0  # a cold measurement's time cap, <= 0: max_time_ms (RunOptions)

    def wants_cold(self, warm_ms: float, best_ms: float | None) -> bool:
        """Cold samples for a call whose warm median is ``warm_ms``, in a job whose best library call
        so far took ``best_ms`` (None: not known): every call (``all``), none, or (``contenders``) a
        call within ``contenders_within`` of the faster of the two (harness.hpp, Options::Cold)."""
        if self.cold == "all":
            return True
        if self.cold != "contenders" or not math.isfinite(warm_ms):
            return False
        best = warm_ms if best_ms is None else min(best_ms, warm_ms)
        return warm_ms <= (1.0 + self.contenders_within) * best


def median_rse(samples: list[float]) -> float:
    """Relative standard error of the median: sqrt(pi/2) * (IQR / 1.349) / sqrt(n) / median, the
    harness's estimate (cpp/include/benanza/stats.hpp); a Python float."""
    import numpy as np

    if len(samples) < 2:
        return math.inf
    q1, med, q3 = (float(v) for v in np.percentile(samples, [25, 50, 75]))
    if med <= 0:
        return math.inf
    return math.sqrt(math.pi / 2) * ((q3 - q1) / 1.349) / math.sqrt(len(samples)) / med


def summarize(samples: list[float], policy: Policy) -> dict:
    """The harness's statistics of samples (ms per call): quartiles by linear interpolation."""
    import numpy as np

    a = np.asarray(samples, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    rse = median_rse(samples)
    rse = float(rse)
    return {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3), "mean_ms": float(a.mean()),
            "min_ms": float(a.min()), "max_ms": float(a.max()), "stddev_ms": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "rse": rse if math.isfinite(rse) else None, "samples": len(samples),
            "converged": bool(len(samples) >= policy.min_samples and rse <= policy.rse)}


#: samples enqueued back to back between one host synchronisation (the harness's batch_samples)
BATCH_SAMPLES = 8


def _sample(enqueue: Callable, calls: int, policy: Policy, lead: Callable[[], None] | None = None) -> list[float]:
    """Samples (ms per call) until the stopping rule holds: batches of up to :data:`BATCH_SAMPLES`
    samples, each enqueued by ``enqueue(e0, e1)`` between two CUDA events, one host synchronisation
    per batch, the batch led by ``lead()`` (an untimed call, so the GPU never waits for the host
    inside it). ``calls``: the calls in one sample."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * BATCH_SAMPLES)]
    samples: list[float] = []
    t0 = time.perf_counter()
    while True:
        k = BATCH_SAMPLES if len(samples) >= policy.min_samples else \
            min(BATCH_SAMPLES, policy.min_samples - len(samples) + BATCH_SAMPLES // 2)
        k = max(1, min(k, policy.max_samples - len(samples)))
        if lead is not None:
            lead()
        for i in range(k):
            enqueue(events[2 * i], events[2 * i + 1])
        events[2 * k - 1].synchronize()
        samples += [events[2 * i].elapsed_time(events[2 * i + 1]) / calls for i in range(k)]
        n = len(samples)
        if n >= policy.max_samples:
            break
        if n >= policy.min_samples and (median_rse(samples) <= policy.rse
                                        or (time.perf_counter() - t0) * 1e3 >= policy.max_time_ms):
            break
    return samples


def _check(torch, out, want: int) -> str:
    """Why ``out`` is not a valid output ("" when it is)."""
    if not isinstance(out, torch.Tensor):
        return f"the call returned {type(out).__name__}, not a tensor"
    if out.numel() != want:
        return f"the call wrote {out.numel()} elements, the config has {want}"
    if out.is_floating_point() and not bool(torch.isfinite(out).all()):
        return "the output holds NaN or Inf"
    return ""


class _Laps:
    """Wall ms per phase of one measurement (``cost_ms`` with ``--profile``; the harness's phases)."""

    def __init__(self):
        self.t0 = self.t = time.perf_counter()
        self.ms: dict[str, float] = {}

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.ms[phase] = self.ms.get(phase, 0.0) + (now - self.t) * 1e3
        self.t = now


def _warm_up(cand: Candidate, policy: Policy, stream) -> tuple[int, float]:
    """At least 3 calls and ``policy.warmup_ms``: (calls made, ms of the last one)."""
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, w0 = 0, time.perf_counter()
    while True:
        e0.record(stream)
        cand.fn()
        e1.record(stream)
        e1.synchronize()
        calls += 1
        if (time.perf_counter() - w0) * 1e3 >= policy.warmup_ms and calls >= 3:
            return calls, e0.elapsed_time(e1)


def _capture(cand: Candidate, reps: int, stream):
    """``reps`` calls captured in a CUDA graph (replayed once), or None when the call cannot be
    captured (then it is timed as eager calls between events)."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(stream)
        with torch.cuda.stream(side):
            for _ in range(2):
                cand.fn()
        stream.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                cand.fn()
        graph.replay()
        torch.cuda.synchronize()
        return graph
    except Exception:  # not capturable
        torch.cuda.synchronize()
        _reset_generator()
        return None


def _reset_generator() -> None:
    """After a failed capture: the default CUDA generator as if no capture had begun. A capture that
    fails leaves it marked as capturing (CUDAGraph::capture_end throws before its epilogue), and every
    later random op of the process then fails with "Offset increment outside graph capture
    encountered unexpectedly" (on an H100: the framework candidates of every training kind after
    one such failure). A clone of its state (same seed and offset) is not
    capturing; ``graphsafe_set_state`` installs it (torch.Generator, PyTorch >= 2.4). Not yet run on a
    GPU (tests/test_torch_candidates.py checks the calls on a stand-in of torch)."""
    import torch

    try:
        gen = torch.cuda.default_generators[torch.cuda.current_device()]
        gen.graphsafe_set_state(gen.clone_state())
    except (AttributeError, RuntimeError):  # an older PyTorch: the failures stay recorded as such
        pass


def measure(cand: Candidate, policy: Policy, l2_bytes: int = 0, best_ms: float | None = None,
            laps: _Laps | None = None) -> list[dict]:
    """Time ``cand`` warm, and cold when ``policy.wants_cold`` (``best_ms``: the job's best library
    call, ms): records with the harness's fields (status, statistics, method, reps, host_us).
    ``laps`` gets the wall time per phase. Raises RuntimeError (a CUDA error) to the caller."""
    import torch

    laps = laps or _Laps()
    torch.backends.cudnn.benchmark = True
    stream = torch.cuda.current_stream()
    t = time.perf_counter()
    out = cand.fn()
    torch.cuda.synchronize()
    host_us = (time.perf_counter() - t) * 1e6
    why = _check(torch, out, cand.out_numel)
    laps("first")
    if why:
        return [{"cache": "warm", "status": "failed", "message": why}]
    calls, per_call = _warm_up(cand, policy, stream)
    reps = max(1, min(policy.max_reps, math.ceil(policy.sample_ms / max(per_call, 1e-6))))
    laps("warmup")
    graph = _capture(cand, reps, stream) if policy.graphs else None
    method = "cuda_graph" if graph is not None else "stream"

    def replay() -> None:
        if graph is not None:
            graph.replay()
        else:
            for _ in range(reps):
                cand.fn()

    def warm_once(a, b) -> None:
        a.record(stream)
        replay()
        b.record(stream)
    laps("capture")
    rec = {"cache": "warm", "status": "ok", "method": method, "reps": reps, "host_us": host_us,
           "warmup_calls": calls, **summarize(_sample(warm_once, reps, policy, replay), policy)}
    laps("warm")
    out = [rec]
    if policy.wants_cold(rec["median_ms"], best_ms) and l2_bytes > 0:
        flush = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")

        def cold_once(a, b) -> None:
            flush.fill_(1)
            a.record(stream)
            cand.fn()
            b.record(stream)
        cold_policy = policy if policy.cold_max_time_ms <= 0 else dataclasses.replace(
            policy, max_time_ms=min(policy.max_time_ms, policy.cold_max_time_ms))
        out.append({"cache": "cold", "status": "ok", "method": "stream_l2_flushed", "reps": 1, "host_us": host_us,
                    **summarize(_sample(cold_once, 1, cold_policy), policy)})
        laps("cold")
    del graph
    if policy.profile:
        out[-1]["cost_ms"] = dict(laps.ms)
    return out


# ------------------------------------------------------------------------------- the worker

def _plain(v):
    """JSON for numpy scalars (their Python value) and anything else (its text)."""
    item = getattr(v, "item", None)
    return item() if callable(item) else str(v)


def _emit(rec: dict) -> None:
    sys.stdout.write(json.dumps(rec, default=_plain) + "\n")
    sys.stdout.flush()


def _kernel_names(cand: Candidate) -> list[str]:
    """The GPU kernels one call launches (torch.profiler), for the record's details."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        cand.fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.name not in names:
            names.append(e.name)
    return names[:8]


def run_job(job: dict, policy: Policy, l2_bytes: int, kernels: bool = True, laps: _Laps | None = None) -> list[dict]:
    """The measurement records of one job (a jobs-file line; its ``best_ms``, when given, is the
    job's best library call: the cold policy's reference)."""
    import torch

    cfg = L.config_from_params(job["kind"], job["params"])
    precision, layout = job["precision"], job.get("layout", "NCHW")
    base = {"type": "measurement", "job": job["job"], "layer_key": cfg.key, "kind": cfg.kind, "precision": precision,
            "math": math_mode(cfg, precision), "dtype": L.PRECISION_DTYPE.get(precision, ""), "layout": layout,
            "workspace_bytes": 0, "backend": Backend.TORCH_EAGER.value}
    try:
        with torch.inference_mode():
            cand = build(cfg, precision, layout, "cuda")
            base.update(call=cand.call, algorithm=cand.algorithm, note=cand.note, backend=cand.backend.value)
            details = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), **cand.details}
            laps = laps or _Laps()
            recs = measure(cand, policy, l2_bytes, job.get("best_ms"), laps)
            if kernels and recs[0].get("status") == "ok":
                details["kernels"] = _kernel_names(cand)
                laps("kernels")
            # the other ways PyTorch runs the config (Candidate.variants), each its own records
            extra = []
            for var in cand.variants:
                vbase = {**base, "call": var.call, "algorithm": var.algorithm, "note": var.note,
                         "backend": var.backend.value}
                vdetails = {"torch": details["torch"], "cudnn": details["cudnn"], **var.details}
                try:
                    vrecs = measure(var, policy, l2_bytes, job.get("best_ms"), laps)
                except NotSupported as e:  # this variant only (e.g. an SDPA backend that refuses the config)
                    vrecs = [{"cache": "warm", "status": "not_supported", "message": str(e)}]
                except (RuntimeError, ValueError, TypeError) as e:  # this variant only
                    if "CUDA error" in str(e) or "illegal memory" in str(e):
                        raise
                    vrecs = [{"cache": "warm", "status": "failed", "message": str(e).strip()[:300] or type(e).__name__}]
                if kernels and vrecs[0].get("status") == "ok":
                    vdetails["kernels"] = _kernel_names(var)
                extra += [{**vbase, "details": vdetails, **r} for r in vrecs]
    except NotSupported as e:
        return [{**base, "call": base.get("call") or Backend.TORCH_EAGER.call_name(cfg.kind),
                 "algorithm": base.get("algorithm", "*"), "cache": "warm", "status": "not_supported", "message": str(e)}]
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        if "CUDA error" in str(e) or "illegal memory" in str(e):
            raise
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        return [{**base, "call": base.get("call") or Backend.TORCH_EAGER.call_name(cfg.kind),
                 "algorithm": base.get("algorithm", "*"), "cache": "warm", "status": "failed", "message": msg}]
    return [{**base, "details": details, **r} for r in recs] + extra


def _args(argv: list[str]) -> argparse.Namespace:
    """The suite's flags (benanza.runner.run.RunOptions.suite_args), with the runner's defaults."""
    from benanza.runner.run import RunOptions

    d = RunOptions()
    ap = argparse.ArgumentParser(prog="python -m benanza.profiles.torch_candidates",
                                 description="Time the framework's own kernels for benanza jobs (a suite-protocol worker).")
    ap.add_argument("--jobs", required=True, help="JSON lines: job, kind, params, precision, layout, best_ms "
                    "(a file, or - for standard input)")
    for flag, default in (("--device", d.device), ("--warmup-ms", d.warmup_ms), ("--sample-ms", d.sample_ms),
                          ("--rse", d.rse), ("--min-samples", d.min_samples), ("--max-samples", d.max_samples),
                          ("--max-time-ms", d.max_time_ms), ("--workspace-limit-mb", d.workspace_limit_mb),
                          ("--screen", d.screen), ("--max-engines", d.max_engines),
                          ("--cold-max-time-ms", 0.0)):
        ap.add_argument(flag, type=type(default), default=default)  # screen, max-engines: one call per job
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--cold-policy", choices=("contenders", "all", "none"), default=d.cold)
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--no-race", action="store_true")  # one call per job: nothing to race
    ap.add_argument("--profile", action="store_true")
    return ap.parse_args(argv)


def _stdin_jobs():
    """The jobs of ``--jobs -``: one JSON object per line of standard input, yielded as it comes; a
    line that is not JSON ends the worker with ValueError."""
    for line in iter(sys.stdin.readline, ""):
        if line.strip():
            yield json.loads(line)


def main(argv: list[str] | None = None) -> int:
    """The worker: exit 0 when every job ran (failures recorded), 3 without PyTorch or a CUDA
    device (a ``fatal`` line says why), 2 for an unreadable jobs file."""
    a = _args(sys.argv[1:] if argv is None else argv)
    try:  # "-": jobs read from standard input one line at a time, as the runner hands them out
        jobs = (_stdin_jobs() if a.jobs == "-" else
                [json.loads(line) for line in open(a.jobs, encoding="utf-8") if line.strip()])
    except (OSError, ValueError) as e:
        _emit({"type": "fatal", "message": f"jobs file {a.jobs}: {e}"})
        return 2
    try:
        import torch
    except Exception as e:
        _emit({"type": "fatal", "message": f"PyTorch does not import: {e}"})
        return 3
    if not torch.cuda.is_available() or a.device >= torch.cuda.device_count():
        _emit({"type": "fatal", "message": f"no CUDA device {a.device} for PyTorch"})
        return 3
    torch.cuda.set_device(a.device)
    l2 = int(getattr(torch.cuda.get_device_properties(a.device), "L2_cache_size", 0) or 0)
    policy = Policy(a.warmup_ms, a.sample_ms, a.rse, a.min_samples, a.max_samples, a.max_time_ms,
                    "none" if a.no_cold else a.cold_policy, not a.no_graphs, profile=a.profile,
                    cold_max_time_ms=a.cold_max_time_ms)
    from benanza.runner.run import GpuLock

    # BENANZA_GPU_LOCK: the GPU is shared with the suite's processes (bench times the framework's
    # kernels beside the compile and then beside the suite's run): a job holds it throughout
    gpu = GpuLock(sync=torch.cuda.synchronize)
    for job in jobs:
        _emit({"type": "job_start", "job": job["job"]})
        laps = _Laps()
        waited = gpu.wait_ms
        try:
            with gpu:
                laps.t = time.perf_counter()  # the wait is not a phase of the job
                recs = run_job(job, policy, l2, laps=laps)
        except Exception as e:  # a sticky CUDA error: the runner restarts the worker
            _emit({"type": "fatal", "message": f"{job['job']}: {str(e).splitlines()[0][:300]}"})
            return 1
        for r in recs:
            _emit(r)
        torch.cuda.empty_cache()
        end = {"type": "job_end", "job": job["job"], "status": "ok"}
        if a.profile:
            end["cost_ms"] = {"wall": (time.perf_counter() - laps.t0) * 1e3, **laps.ms,
                              "gpu_wait": gpu.wait_ms - waited}
        _emit(end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
