"""The CLI's options, declared once: one-line option types (``Annotated``) and option sets that
several commands share, each collected into one value (:func:`option_set`): the timing options into a
:class:`benanza.spec.Timing`, the scenario options of ``analyze``, ``roofline`` and ``predict`` into a
:class:`ScenarioOptions`, the cluster options into a :class:`ClusterOptions`."""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from benanza.spec import DTYPE_HELP, TIMING, Timing

LAYOUT_HELP = ("tensor layouts: nchw,nhwc (default: convolutions and their neighbours -- BatchNorm, pooling, "
               "per-channel elementwise -- also channels-last, each layer taking the faster; layout conversions "
               "reported apart, not counted), or nchw (the model's layout only)")
CONV_TF32_HELP = ("with --dtype fp32: convolutions (and cuDNN RNNs) in tf32, matmuls and the rest in fp32 -- PyTorch's "
                  "default (torch.backends.cudnn.allow_tf32 on, torch.backends.cuda.matmul.allow_tf32 off)")
TRAIN_HELP = ("the training step too: every layer's backward calls (data and weight gradients) are "
              "timed, and the step's LBL (forward + backward, critical path) is printed; incomplete while a "
              "layer kind has no backward pass in benanza yet, or the optimizer's update is not measured")
OPTIMIZER_HELP = ("with --train: the optimizer whose step is timed over the model's parameters and whose state "
                  "the memory bound holds: sgd (with momentum), adam or adamw (torch.optim's defaults; default sgd)")
DB_HELP = "performance database: SQLAlchemy URL or SQLite file (default: $BENANZA_DB or ~/.local/share/benanza/perf.db)"
DIM_HELP = "bind another symbolic dim of the model's inputs: NAME=VALUE (repeatable)"
BATCH_DIM_HELP = "which dim of a fixed-shape input is the batch (default: dim 0, or the symbolic one)"
QUIET_HELP = "no progress bars or stage lines on stderr (the results still print)"
DEVICE_HELP = "CUDA device index to run on"
CLUSTER_HELP = ("run the jobs on a Dask cluster: the scheduler's address tcp://HOST:PORT (workers: `benanza worker`), "
                "or local (a worker per GPU here, --devices); the suite folder must be on a file system the "
                "workers share (pip install benanza[cluster])")
GPU_KINDS_HELP = "with --cluster: measure on these GPU kinds, e.g. NVIDIA_H100_80GB_HBM3,NVIDIA_H200 (default: every kind)"
TORCH_HELP = ("also time each layer and fusion candidate as PyTorch runs it (the framework's own kernels, "
              "calls torch:aten::...), a candidate of the LBL; default: when PyTorch sees a CUDA device")
FORMAT_HELP = "table, csv or json"
SYSTEM_HELP = "system id, fingerprint prefix or GPU name"
CACHE_HELP = "warm (default) or cold measurements"

# one-line option types
Model = Annotated[Path, typer.Argument(help="ONNX model file")]
Batches = Annotated[str, typer.Option("--batch", "-b", help="batch sizes, e.g. 1,32")]
OneBatch = Annotated[int, typer.Option("--batch", "-b", help="batch size")]
SuiteDtypes = Annotated[str, typer.Option("--dtype", "-t", help=DTYPE_HELP["suite"])]
Dtypes = Annotated[str, typer.Option("--dtype", "-t", help=DTYPE_HELP["analysis"])]
OneDtype = Annotated[str, typer.Option("--dtype", "-t", help=DTYPE_HELP["one"])]
Db = Annotated[Optional[str], typer.Option("--db", help=DB_HELP)]
System = Annotated[Optional[str], typer.Option("--system", help=SYSTEM_HELP)]
Layout = Annotated[str, typer.Option("--layout", help=LAYOUT_HELP)]
Dim = Annotated[Optional[list[str]], typer.Option("--dim", help=DIM_HELP)]
BatchDim = Annotated[Optional[int], typer.Option("--batch-dim", help=BATCH_DIM_HELP)]
ConvTf32 = Annotated[bool, typer.Option("--conv-tf32", help=CONV_TF32_HELP)]
Optimizer = Annotated[Optional[str], typer.Option("--optimizer", help=OPTIMIZER_HELP)]
Json = Annotated[bool, typer.Option("--json", help="JSON on stdout")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)]
Torch = Annotated[Optional[bool], typer.Option("--torch/--no-torch", help=TORCH_HELP)]
Device = Annotated[int, typer.Option("--device", help=DEVICE_HELP)]
Fmt = Annotated[str, typer.Option("--format", help=FORMAT_HELP)]
LayersTable = Annotated[bool, typer.Option("--layers/--no-layers", help="print the per-layer table(s)")]
Warmup = Annotated[int, typer.Option("--warmup", help="warm-up inferences before timing (at most 3 s once 5 are done)")]
Runs = Annotated[int, typer.Option("--runs", help="timed inferences (latency median and IQR; at most 5 s once 10 are done)")]
Iterations = Annotated[int, typer.Option("--iterations", help="inferences recorded by torch.profiler")]


def _opt(default, *names, help: str):
    return typer.Option(default, *names, help=help)


#: the timing options (``bench``, ``run``): field of :class:`benanza.spec.Timing` -> (type, option)
TIMING_OPTIONS = {
    "force": (bool, _opt(False, "--force", help="measure again what the database already has")),
    "retry_failed": (bool, _opt(False, "--retry-failed", help="run again the jobs that failed")),
    "warmup_ms": (float, _opt(TIMING.warmup_ms, "--warmup-ms",
                              help="warm-up per measurement after the first call and at least 3 calls (ms)")),
    "rse": (float, _opt(TIMING.rse, "--rse", help="target relative standard error of the median: sampling stops below it")),
    "min_samples": (int, _opt(TIMING.min_samples, "--min-samples", help="least timed samples per measurement")),
    "max_samples": (int, _opt(TIMING.max_samples, "--max-samples", help="most timed samples per measurement")),
    "max_time_ms": (float, _opt(TIMING.max_time_ms, "--max-time-ms", help="sampling time cap per measurement (ms)")),
    "workspace_mb": (float, _opt(TIMING.workspace_mb, "--workspace-limit-mb",
                                 help="largest workspace a cuDNN/cuBLAS algorithm may use (MB); those needing more "
                                      "are skipped")),
    "cold": (str, _opt(TIMING.cold, "--cold", help="cold-cache figures (L2 flushed before each call) for: contenders "
                                                  "(default: each job's chosen implementation and those within 5 % of "
                                                  "it), all (every valid call) or none")),
    "no_cold": (bool, _opt(False, "--no-cold", help="no cold-cache figures (the same as --cold none)")),
    "exhaustive": (bool, _opt(False, "--exhaustive",
                              help="no racing: every candidate sampled to the stopping rule, cold figures for all (the "
                                   "policy before racing, stricter: for validating the default's LBL)")),
    "workers_per_gpu": (int, _opt(TIMING.workers_per_gpu, "--workers-per-gpu",
                                  help="suite processes per GPU, taking turns on it: one builds engine plans while "
                                       "another times calls (1: one process)")),
    "screen": (float, _opt(TIMING.screen, "--screen",
                           help="with --exhaustive: skip sampling a call whose first replay is slower than this x its "
                                "job's best so far (recorded as screened with that time); 0 (default): sample every call")),
    "max_engines": (int, _opt(TIMING.max_engines, "--max-engines",
                              help="quick runs: time at most this many cuDNN engine configs, cuBLASLt configs and legacy "
                                   "convolution algorithms per call and job, in heuristics order (the rest recorded as "
                                   "skipped; fewer candidates can only raise the LBL); 0: all, and cuBLASLt's algo-id "
                                   "search")),
    "prior": (Optional[str], _opt(None, "--prior",
                                  help="opt-in: measurements already known for this GPU model (a database file or URL, "
                                       "e.g. db/reference/h200_truth.sqlite.gz, or 'self': this database's earlier runs) "
                                       "rank each job's candidates; only those within --prior-margin of its best, and a "
                                       "sample of the others, are timed (the rest recorded as skipped)")),
    "prior_margin": (float, _opt(TIMING.prior_margin, "--prior-margin",
                                 help="with --prior: a contender's median is within this fraction of the prior's best")),
    "device": (int, _opt(TIMING.device, "--device", help=DEVICE_HELP)),
    "devices": (Optional[str], _opt(None, "--devices", help="several identical GPUs: 'all' or 0,1,...")),
    "job_timeout": (float, _opt(TIMING.job_timeout, "--job-timeout",
                                help="seconds before a job (one layer config) is killed and recorded as failed")),
}


@dataclass(frozen=True)
class ScenarioOptions:
    """The scenario options ``analyze``, ``roofline`` and ``predict`` share: layouts, cache, the
    convolutions' precision, bound dims and the batch dim (parsed by :mod:`benanza.spec`)."""

    layout: str = "nchw,nhwc"
    cache: str = "warm"
    conv_tf32: bool = False
    dim: tuple[str, ...] = ()
    batch_dim: int | None = None


SCENARIO_OPTIONS = {
    "layout": (str, _opt("nchw,nhwc", "--layout", help=LAYOUT_HELP)),
    "cache": (str, _opt("warm", "--cache", help=CACHE_HELP)),
    "conv_tf32": (bool, _opt(False, "--conv-tf32", help=CONV_TF32_HELP)),
    "dim": (Optional[list[str]], _opt(None, "--dim", help=DIM_HELP)),
    "batch_dim": (Optional[int], _opt(None, "--batch-dim", help=BATCH_DIM_HELP)),
}


@dataclass(frozen=True)
class ClusterOptions:
    """``--cluster`` and ``--gpu-kinds`` (``bench``, ``run``)."""

    cluster: str | None = None
    gpu_kinds: str | None = None


CLUSTER_OPTIONS = {
    "cluster": (Optional[str], _opt(None, "--cluster", help=CLUSTER_HELP)),
    "gpu_kinds": (Optional[str], _opt(None, "--gpu-kinds", help=GPU_KINDS_HELP)),
}


def option_set(placeholder: str, options: dict, make):
    """A decorator: the command's parameter ``placeholder`` is replaced, where it stands, by the
    ``options`` (name -> (type, typer option)); their values reach the command as one value,
    ``make(**values)``."""
    def wrap(fn):
        sig = inspect.signature(fn, eval_str=True)
        params = []
        for p in sig.parameters.values():
            if p.name == placeholder:
                params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=o, annotation=t)
                           for n, (t, o) in options.items()]
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(fn)
        def wrapper(*args, **kw):
            kw[placeholder] = make(**{n: kw.pop(n) for n in options})
            return fn(*args, **kw)

        wrapper.__signature__ = sig.replace(parameters=params)
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper
    return wrap


timing_options = option_set("timing", TIMING_OPTIONS, Timing)
scenario_options = option_set("scenario", SCENARIO_OPTIONS,
                              lambda dim=None, **kw: ScenarioOptions(dim=tuple(dim or ()), **kw))
cluster_options = option_set("cluster", CLUSTER_OPTIONS, ClusterOptions)
