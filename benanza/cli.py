"""The ``benanza`` command line (typer + rich).

Every failure the user can cause prints one line ``benanza: <what and where>`` on stderr and exits
non-zero (codes in :mod:`benanza.errors`); no traceback unless ``BENANZA_DEBUG=1``.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from benanza import __version__
from benanza.api import TIMING  # the one home of the timing defaults
from benanza import kinds as L
from benanza.kinds.precision import Precision
from benanza.errors import BenanzaError, UsageError
from benanza.reports.tables import Col, FitTable, console, fmt_ms
from benanza.versions import version_text

# plain (click) help: it wraps to the terminal and shows a flag without a `<bool>` value
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help="benanza: how fast could this ONNX model run on this GPU, and what stands in the way.")
db_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                     help="Query the performance database.")
app.add_typer(db_app, name="db")

# the terminal's width on a terminal; pipes and files get every table whole, without colour
out = console()
err = console(stderr=True)

LAYOUT_HELP = ("tensor layouts: nchw,nhwc (default: convolutions and their neighbours -- BatchNorm, pooling, "
               "per-channel elementwise -- also channels-last, each layer taking the faster), or nchw "
               "(the model's layout only)")
CONV_TF32_HELP = ("with --dtype fp32: convolutions (and cuDNN RNNs) in tf32, matmuls and the rest in fp32 -- PyTorch's default "
                  "(torch.backends.cudnn.allow_tf32 on, torch.backends.cuda.matmul.allow_tf32 off)")
TRAIN_HELP = ("the training step too: every layer's backward calls (data and weight gradients) are "
              "timed, and the step's LBL (forward + backward, critical path) is printed; incomplete while a "
              "layer kind has no backward pass in benanza yet, or the optimizer's update is not measured")


OPTIMIZER_HELP = ("with --train: the optimizer whose step is timed over the model's parameters and whose state "
                  "the memory bound holds: sgd (with momentum), adam or adamw (torch.optim's defaults)")


DB_HELP = "performance database: SQLAlchemy URL or SQLite file (default: $BENANZA_DB or ~/.local/share/benanza/perf.db)"
DIM_HELP = "bind another symbolic dim of the model's inputs: NAME=VALUE (repeatable)"
BATCH_DIM_HELP = "which dim of a fixed-shape input is the batch (default: dim 0, or the symbolic one)"
QUIET_HELP = "no progress bars or stage lines on stderr (the results still print)"
DEVICE_HELP = "CUDA device index to run on"
CLUSTER_HELP = ("run the jobs on a Dask cluster: the scheduler's address tcp://HOST:PORT (workers: `benanza worker`), "
                "or local (a worker per GPU here, --devices); the suite folder must be on a file system the "
                "workers share (pip install benanza[cluster])")
GPU_KINDS_HELP = "with --cluster: measure on these GPU kinds, e.g. NVIDIA_H100_80GB_HBM3,NVIDIA_H200 (default: every kind)"


def _print_json(doc, default=None) -> None:
    """``--json`` output: the document as indented JSON on stdout. Plain ``json.dumps``, not
    rich's ``print_json``: rich highlights every token, 2.2 s for one resnet50 bench document on an
    H200 host (``benchmarks/speed.py --profile-repeat``, 2026-11-26), more than the rest of a repeat."""
    sys.stdout.write(json.dumps(doc, indent=2, default=default) + "\n")
    sys.stdout.flush()


def _fail(msg: str, code: int) -> None:
    err.print(f"benanza: {msg}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn):
    """Turn BenanzaError, Ctrl-C and unexpected errors into one line and an exit code; a SQLite file
    the failed command created and left empty is removed (:func:`benanza.database.store.discard_fresh`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from benanza.database.store import fresh_mark

        mark = fresh_mark()
        try:
            return fn(*args, **kwargs)
        except typer.Exit as e:
            if e.exit_code:
                _discard_fresh(mark)
            raise
        except BaseException:
            _discard_fresh(mark)
            return _guarded_failure()

    return wrapper


def _discard_fresh(mark: int) -> None:
    try:
        from benanza.database.store import discard_fresh

        discard_fresh(mark)
    except Exception:  # noqa: BLE001 - cleaning up must not hide the failure
        pass


def _guarded_failure():
    """The one line and exit code of the exception being handled."""
    try:
        raise
    except typer.Exit:
        raise
    except BenanzaError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted; every finished job is in the database, run again to resume", 130)
    except (IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError) as e:
        # a path the user gave that cannot be written or read as asked: a usage error
        _fail(f"{e.filename}: {e.strerror.lower() if e.strerror else type(e).__name__}", 2)
    except OSError as e:  # a full disk, a read-only file system, an I/O error: the system's words
        if e.errno is None or os.environ.get("BENANZA_DEBUG"):
            _internal_error(e)
        where = f"{e.filename}: " if e.filename else ""
        _fail(f"{where}{(e.strerror or os.strerror(e.errno)).lower()}", 1)
    except Exception as e:  # never a traceback for the user
        _internal_error(e)


def _internal_error(e: BaseException):
    """Exit 70 with one line for an exception benanza did not expect (the traceback with
    BENANZA_DEBUG=1)."""
    if os.environ.get("BENANZA_DEBUG"):
        raise e
    _fail(f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
          f"(set BENANZA_DEBUG=1 for the traceback)", 70)


def _check_output_file(flag: str, path: Optional[Path]) -> None:
    """A file the command will write: refused before any work when it is a folder or its folder is
    missing (a chart written last must not cost the table)."""
    if path is None:
        return
    if path.is_dir():
        name = {"--png": "roofline.png", "--svg": "roofline.svg", "--trace": "lbl.json"}.get(flag, "export.json")
        raise UsageError(f"{flag} {path}: is a folder; give a file name, e.g. {path / name}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {path.parent} does not exist")


def _parse_dims(dims: list[str] | None) -> dict[str, int]:
    outd = {}
    for d in dims or []:
        name, _, val = d.partition("=")
        try:
            v = int(val)
        except ValueError:
            raise UsageError(f"--dim {d!r}: expected NAME=INTEGER") from None
        if not name or v <= 0:
            raise UsageError(f"--dim {d!r}: expected NAME=POSITIVE_INTEGER")
        outd[name] = v
    return outd


def _process_all(model: Path, batches: list[int], dims: dict, batch_dim: Optional[int], quiet: bool = False):
    from benanza.processing.cache import process

    mls = []
    for b in batches:
        ml = process(model, b, dims, batch_dim)
        if not quiet:
            for n in ml.notices:
                err.print(f"notice: {n}", markup=False)
        mls.append(ml)
    return mls


# ------------------------------------------------------------------------------------------ layers

@app.command()
@guarded
def layers(model: Path = typer.Argument(..., help="ONNX model file"),
           batch: str = typer.Option("1", "--batch", "-b", help="batch sizes, e.g. 1,32"),
           json_out: bool = typer.Option(False, "--json", help="JSON on stdout"),
           details: bool = typer.Option(False, "--details", help="list every layer"),
           dim: Optional[list[str]] = typer.Option(None, "--dim", help="bind another symbolic dim: NAME=VALUE"),
           batch_dim: Optional[int] = typer.Option(None, "--batch-dim", help="which dim of a fixed-shape input is the batch")):
    """Parse MODEL into layers: counts and unique layers by type, unsupported ops, fusion candidates.

    Example: benanza layers resnet50.onnx --batch 32"""
    from benanza.processing.model import parse_batches

    mls = _process_all(model, parse_batches(batch), _parse_dims(dim), batch_dim, quiet=json_out)
    if json_out:
        docs = []
        for ml in mls:
            d = ml.summary()
            d["layer_list"] = [ly.to_dict() for ly in ml.layers]
            docs.append(d)
        _print_json(docs[0] if len(docs) == 1 else docs)
        return
    for ml in mls:
        s = ml.summary()
        t = FitTable(f"{ml.model} batch {ml.batch}: {s['layers']} layers, {s['unique_layers']} unique; "
                     f"{s['benchmarked_layers']} benchmarked ({s['unique_benchmarked']} unique), "
                     f"{s['zero_cost_layers']} zero-cost, {sum(s['unsupported'].values())} unsupported",
                     [Col("op", "name"), Col("layers", "num"), Col("unique", "num"), Col("status")])
        status = {}
        for ly in ml.layers:
            status.setdefault(ly.op_type, set()).add(ly.status)
        for op, c in s["by_type"].items():
            t.add_row(op, str(c["count"]), str(c["unique"]), ", ".join(sorted(status[op])))
        out.print(t)
        if s["unsupported"]:
            reasons = {}
            for ly in ml.layers:
                if ly.status == "unsupported":
                    reasons.setdefault(ly.op_type, ly.reason)
            for op, n in s["unsupported"].items():
                out.print(f"unsupported: {op} x{n}: {reasons[op]}", markup=False)
        cov = s["coverage"]
        out.print(f"coverage: {cov['percent']:g}% of compute layers benchmarked ({cov['benchmarked']} of "
                  f"{cov['compute_layers']}, {cov['unsupported']} unsupported; {s['zero_cost_layers']} zero-cost "
                  f"layers)", markup=False)
        kinds = ", ".join(f"{k} {v}" for k, v in s["fusions_by_kind"].items())
        out.print(f"fusion candidates: {s['fusion_candidates']}{f' ({kinds})' if kinds else ''}; folded nodes: "
                  f"{sum(s['folded'].values())} ({', '.join(f'{k} {v}' for k, v in s['folded'].items()) or 'none'})",
                  markup=False)
        if details:
            d = FitTable(None, [Col("#", "num"), Col("name", "name"), Col("op", "name", drop=2),
                                Col("status", "name", drop=3), Col("config"), Col("output", "name", drop=1)])
            for ly in ml.layers:
                d.add_row(str(ly.index), ly.name, ly.op_type, ly.status,
                          ly.config.describe() if ly.config else ly.reason,
                          "x".join(map(str, ly.output_shapes[0])) if ly.output_shapes and ly.output_shapes[0] else "?")
            out.print(d)


# ---------------------------------------------------------------------------------------- generate

@app.command()
@guarded
def generate(model: Path = typer.Argument(..., help="ONNX model file"),
             batch: str = typer.Option("1", "--batch", "-b", help="batch sizes, e.g. 1,32"),
             dtype: str = typer.Option("fp32", "--dtype", "-t", help="data types: fp32 (FMA), tf32, fp16, bf16, fp8 (FP8 GEMMs, the rest fp16)"),
             output: Path = typer.Option(..., "-o", "--output", help="folder for the suite"),
             layout: str = typer.Option("nchw,nhwc", "--layout", help=LAYOUT_HELP),
             kinds: Optional[str] = typer.Option(None, "--kinds", help="only these layer kinds, e.g. Activation,Elementwise"),
             conv_tf32: bool = typer.Option(False, "--conv-tf32", help=CONV_TF32_HELP),
             dim: Optional[list[str]] = typer.Option(None, "--dim", help=DIM_HELP),
             batch_dim: Optional[int] = typer.Option(None, "--batch-dim", help=BATCH_DIM_HELP),
             train: bool = typer.Option(False, "--train", help="the backward calls of a training step too"),
             optimizer: str = typer.Option("sgd", "--optimizer", help=OPTIMIZER_HELP)):
    """Generate the C++ benchmark suite (and its CMake project) for MODEL's unique layers.

    Example: benanza generate resnet50.onnx --batch 1,32 --dtype fp16 -o suite"""
    from benanza.generation.generator import (generate as gen, parse_kinds, parse_layouts, parse_precisions,
                                              training_folds_note)
    from benanza.processing.model import parse_batches

    precisions = parse_precisions(dtype)
    layouts = parse_layouts(layout)
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: exists and is not a folder; give a folder for the suite")
    mls = _process_all(model, parse_batches(batch), _parse_dims(dim), batch_dim)
    _check_optimizer(optimizer)
    suite = gen(mls, precisions, output, layouts, parse_kinds(kinds), _conv_precision(conv_tf32, precisions),
                train=train, optimizer=optimizer)
    kinds = {}
    for j in suite.jobs:
        kinds[j.kind] = kinds.get(j.kind, 0) + 1
    out.print(f"{len(suite.jobs)} jobs ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) in {output}"
              f"{training_folds_note(mls, train)}", markup=False)


# ------------------------------------------------------------------------------------------- build

@app.command()
@guarded
def build(folder: Path = typer.Argument(..., help="suite folder written by `benanza generate`"),
          jobs: Optional[int] = typer.Option(None, "-j", "--jobs", help="parallel compile jobs"),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar on stderr")):
    """Compile a generated suite with CMake against cuDNN and cuBLAS.

    Example: benanza build suite"""
    from benanza import api

    r = api.build_with_progress(folder, jobs, quiet)
    out.print(f"built {r.executable} (configure {r.configure_s:.1f} s, compile {r.compile_s:.1f} s)", markup=False)


# --------------------------------------------------------------------------------------------- run

MAX_ENGINES_HELP = ("quick runs: time at most this many cuDNN engine configs, cuBLASLt configs and legacy "
                    "convolution algorithms per call and job, in heuristics order (the rest recorded as skipped; "
                    "fewer candidates can only raise the LBL); 0: all, and cuBLASLt's algo-id search")
RSE_HELP = "target relative standard error of the median: sampling stops below it"
MIN_SAMPLES_HELP = "least timed samples per measurement"
MAX_SAMPLES_HELP = "most timed samples per measurement"
MAX_TIME_HELP = "sampling time cap per measurement (ms)"
WORKSPACE_HELP = "largest workspace a cuDNN/cuBLAS algorithm may use (MB); those needing more are skipped"
COLD_HELP = ("cold-cache figures (L2 flushed before each call) for: contenders (default: each job's chosen "
             "implementation and those within 5 % of it), all (every valid call) or none")
WARMUP_HELP = "warm-up per measurement after the first call and at least 3 calls (ms)"
WORKERS_HELP = ("suite processes per GPU, taking turns on it: one builds engine plans while another times "
                "calls (1: one process)")
NO_COLD_HELP = "no cold-cache figures (the same as --cold none)"
EXHAUSTIVE_HELP = ("no racing: every candidate sampled to the stopping rule, cold figures for all (the policy "
                   "before racing, stricter: for validating the default's LBL)")
JOB_TIMEOUT_HELP = "seconds before a job (one layer config) is killed and recorded as failed"
SCREEN_HELP = ("with --exhaustive: skip sampling a call whose first replay is slower than this x its job's "
               "best so far (recorded as screened with that time); 0 (default): sample every call")


TORCH_HELP = ("also time each layer and fusion candidate as PyTorch runs it (the framework's own kernels, "
              "calls torch:aten::...), a candidate of the LBL; default: when PyTorch sees a CUDA device")


@app.command()
@guarded
def run(folder: Path = typer.Argument(..., help="built suite folder"),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        force: bool = typer.Option(False, "--force", help="measure again what the database already has"),
        retry_failed: bool = typer.Option(False, "--retry-failed", help="run again the jobs that failed"),
        warmup_ms: float = typer.Option(TIMING.warmup_ms, "--warmup-ms", help=WARMUP_HELP),
        rse: float = typer.Option(TIMING.rse, "--rse", help=RSE_HELP),
        min_samples: int = typer.Option(TIMING.min_samples, "--min-samples", help=MIN_SAMPLES_HELP),
        max_samples: int = typer.Option(TIMING.max_samples, "--max-samples", help=MAX_SAMPLES_HELP),
        max_time_ms: float = typer.Option(TIMING.max_time_ms, "--max-time-ms", help=MAX_TIME_HELP),
        workspace_mb: float = typer.Option(TIMING.workspace_mb, "--workspace-limit-mb", help=WORKSPACE_HELP),
        cold: str = typer.Option(TIMING.cold, "--cold", help=COLD_HELP),
        no_cold: bool = typer.Option(False, "--no-cold", help=NO_COLD_HELP),
        exhaustive: bool = typer.Option(False, "--exhaustive", help=EXHAUSTIVE_HELP),
        workers_per_gpu: int = typer.Option(TIMING.workers_per_gpu, "--workers-per-gpu", help=WORKERS_HELP),
        screen: float = typer.Option(TIMING.screen, "--screen", help=SCREEN_HELP),
        max_engines: int = typer.Option(TIMING.max_engines, "--max-engines", help=MAX_ENGINES_HELP),
        device: int = typer.Option(0, "--device", help=DEVICE_HELP),
        devices: Optional[str] = typer.Option(None, "--devices", help="several identical GPUs: 'all' or 0,1,..."),
        job_timeout: float = typer.Option(TIMING.job_timeout, "--job-timeout", help=JOB_TIMEOUT_HELP),
        torch: Optional[bool] = typer.Option(None, "--torch/--no-torch", help=TORCH_HELP),
        cluster: Optional[str] = typer.Option(None, "--cluster", help=CLUSTER_HELP),
        gpu_kinds: Optional[str] = typer.Option(None, "--gpu-kinds", help=GPU_KINDS_HELP),
        quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
        json_out: bool = typer.Option(False, "--json", help="the run summary as JSON on stdout (no progress)")):
    """Run a built suite on the GPU and store the measurements in the database.

    Example: benanza run suite --db perf.db"""
    from benanza import api
    from benanza.database.store import open_db
    from benanza.generation.generator import load_suite

    kinds = api.cluster_kinds(cluster, gpu_kinds)  # before any work
    suite = load_suite(folder)
    opts = api.Timing(warmup_ms, rse, min_samples, max_samples, max_time_ms, workspace_mb, cold, no_cold, exhaustive,
                      workers_per_gpu, screen, max_engines, device, devices, job_timeout, force,
                      retry_failed).run_options()
    database = open_db(db)
    _db_notices(database)
    if cluster:
        runs = api.run_cluster(suite, database, opts, cluster, kinds, quiet or json_out, devices)
        if json_out:
            _print_json({"cluster": cluster, "runs": [_run_doc(s) for s in runs]})
        else:
            for s in runs:
                out.print(api.run_line(s), markup=False)
        return
    s = api.run_suite(suite, database, opts, quiet or json_out)
    ts = api.run_framework(suite, database, s.system_id, opts, quiet or json_out, torch)
    doc = _run_doc(s)
    if ts is not None:
        doc["framework"] = _run_doc(ts)
    if json_out:
        _print_json(doc)
    else:
        out.print(api.run_line(s), markup=False)
        if ts is not None:
            out.print("framework kernels: " + api.run_line(ts), markup=False)


def _run_doc(s) -> dict:
    return {"system_id": s.system_id, "gpu": s.system.get("gpu_name"), "run_id": s.run_id, "planned": s.planned,
            "skipped": s.skipped, "ok": s.ok, "failed": s.failed, "measurements": s.measurements,
            "restarts": s.restarts, "wall_s": s.wall_s, "failures": [{"job": j, "reason": r} for j, r in s.failures],
            **({"timeline": s.timeline} if getattr(s, "timeline", None) else {})}


# ----------------------------------------------------------------------------------------- analyze

#: the per-layer table's columns; in a narrow terminal an all-empty column goes first (the v7 pick
#: without heuristic records), then the v7 pick, IQR, the critical-path mark, config, math and call
#: (layer, algorithm and time stay; an engine config wraps between its knobs, never inside one)
ANALYSIS_COLUMNS = (Col("#", "num"), Col("layer", "name"), Col("config", drop=3), Col("call", "name", drop=1),
                    Col("algorithm", "token"), Col("math", "name", drop=2), Col("µs", "num"), Col("IQR µs", "num", drop=5),
                    Col("v7 pick (µs)", "token", drop=6), Col("crit", "name", drop=4))


def _analysis_table(a) -> FitTable:
    part = "" if a.complete_unfused else " (partial sums)"
    t = FitTable(f"{a.model} batch {a.batch} {a.precision_label}: LBL {a.lbl_text()}; "
                 f"unfused sequential {a.lbl_sequential_ms:.4f} ms, parallel {a.lbl_parallel_ms:.4f} ms{part}",
                 ANALYSIS_COLUMNS)
    crit = set(a.critical_path)
    for lt in a.layers:
        ly = lt.layer
        if lt.status == "zero_cost":
            continue
        shapes = ly.config.describe() if ly.config else ",".join(
            "x".join(map(str, s)) for s in ly.input_shapes if s)
        if lt.status == "missing":
            t.add_row(str(ly.index), ly.name, shapes, Text("missing", style="red"), lt.reason, "", "-", "-", "", "")
            continue
        pick = ""
        if lt.heuristic_algorithm:
            pick = lt.heuristic_algorithm + (f" {lt.heuristic_ms * 1e3:.1f}" if lt.heuristic_ms is not None
                                             else " (no valid time)")
        t.add_row(str(ly.index), ly.name, shapes, lt.call, lt.algorithm + (" [layout conversion: not counted]"
                                                                          if lt.conversion else ""), lt.math,
                  f"{lt.time_ms * 1e3:.1f}", f"{lt.iqr_ms * 1e3:.1f}" if lt.iqr_ms is not None else "-", pick,
                  "*" if ly.index in crit else "")
    return t


@app.command()
@guarded
def analyze(model: Path = typer.Argument(..., help="ONNX model file"),
            batch: str = typer.Option("1", "--batch", "-b", help="batch sizes"),
            dtype: str = typer.Option("fp32", "--dtype", "-t", help="data types: fp32, tf32, fp16, bf16, fp8"),
            db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
            system_spec: Optional[str] = typer.Option(None, "--system", help="system id, fingerprint prefix or GPU name"),
            cache: str = typer.Option("warm", "--cache", help="warm (default) or cold measurements"),
            layout: str = typer.Option("nchw,nhwc", "--layout", help="layouts a layer may run in: nchw,nhwc "
                                       "(default: convolutions and their neighbours may run channels-last, layout "
                                       "conversions reported apart, not counted) or nchw (the model's layout only)"),
            json_out: bool = typer.Option(False, "--json", help="the analyses (with --profile: the insights) as "
                                          "JSON on stdout"),
            layers_table: bool = typer.Option(True, "--layers/--no-layers", help="print the per-layer table"),
            dim: Optional[list[str]] = typer.Option(None, "--dim", help=DIM_HELP),
            batch_dim: Optional[int] = typer.Option(None, "--batch-dim", help=BATCH_DIM_HELP),
            profile_dir: Optional[Path] = typer.Option(None, "--profile", help="framework profile folder "
                                                       "(`benanza profile`): compare the framework with the LBL"),
            html_out: Optional[Path] = typer.Option(None, "--html", help="with --profile: write a self-contained "
                                                    "HTML report to this file"),
            conv_tf32: bool = typer.Option(False, "--conv-tf32", help=CONV_TF32_HELP),
            allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="with --profile: compare a profile "
                                                "taken of another model file (its recorded hash differs)"),
            trace_out: Optional[Path] = typer.Option(None, "--trace", help="write the parallel LBL's schedule "
                                                     "(critical path on stream 0, one slice per layer with its call "
                                                     "and algorithm) as a Chrome/Perfetto trace JSON to this file"),
            train: bool = typer.Option(False, "--train", help="the training step's LBL too (forward + backward, "
                                       "from `benanza bench --train`'s measurements)"),
            optimizer: str = typer.Option("sgd", "--optimizer", help=OPTIMIZER_HELP)):
    """Lower-bound latency (sequential and parallel) of MODEL from the performance database; with
    --profile DIR, what stands between the framework's measured latency and the LBL (Benanza ratio,
    algorithm selection, framework inefficiencies, fusion, Tensor Cores, joint speedup).

    Example: benanza analyze resnet50.onnx --batch 32 --dtype fp16 --trace lbl.json (open lbl.json in
    ui.perfetto.dev beside the torch.profiler trace)"""
    from benanza import api
    from benanza.database.store import open_db
    from benanza.generation.generator import parse_precisions
    from benanza.processing.model import parse_batches

    precisions = parse_precisions(dtype)
    layouts = api.layouts(layout)
    api.cache(cache)
    _check_output_file("--trace", trace_out)
    if trace_out is not None and (len(precisions) > 1 or len(parse_batches(batch)) > 1):
        raise UsageError("--trace writes one schedule: give one --batch and one --dtype")
    if html_out is not None and profile_dir is None:
        raise UsageError("--html needs --profile DIR (the report compares the framework with the LBL)")
    prof, batches = _profile_and_batches(profile_dir, model, batch, dim, batch_dim, allow_mismatch)
    mls = _process_all(model, batches, _parse_dims(dim), batch_dim, quiet=json_out)
    database = open_db(db, create=False)
    if not json_out:
        _db_notices(database)
    conv_p = _conv_precision(conv_tf32, precisions)
    fingerprint, dims = api.current_fingerprint(), tuple(_parse_dims(dim).items())
    lbs = [api.lower_bound(api.Scenario(model, ml.batch, p, layouts, cache, system_spec, conv_p, dims, batch_dim),
                           database, ml, fingerprint) for ml in mls for p in precisions]
    results, system = [lb.analysis for lb in lbs], lbs[0].system
    steps = _training_steps(lbs, database, optimizer) if train else []
    if not json_out:
        for note in dict.fromkeys(n for lb in lbs for n in lb.notices):
            err.print(f"notice: {note}", markup=False)
    if trace_out is not None:
        from benanza.reports.lbl_trace import write_trace

        write_trace(results[0], mls[0].edges, trace_out)
        if not json_out:
            err.print(f"wrote {trace_out} (the LBL schedule; open it in ui.perfetto.dev)", markup=False)
    if prof is not None:
        _analyze_profile(prof, results, mls[0], database, system, cache, layouts, json_out, html_out)
        return
    from benanza.analysis.llm import llm_doc

    llms = [llm_doc(lb.layers, lb.analysis, database, lb.system) for lb in lbs]  # None: no decoder
    _print_analyses(results, steps, database, system, json_out, layers_table, llms)


def _training_steps(lbs, database, optimizer: str) -> list:
    """``--train``: the training step of each lower bound (:func:`benanza.analysis.training.training_step`)."""
    from benanza.analysis.training import training_step

    _check_optimizer(optimizer)
    return [training_step(lb.layers, lb.analysis, database, lb.system, optimizer) for lb in lbs]


def _check_optimizer(name: str) -> None:
    from benanza.analysis.training import OPTIMIZER_STATE

    if name not in OPTIMIZER_STATE:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZER_STATE)}, got {name!r}")


def _print_analyses(results, steps, database, system, json_out: bool, layers_table: bool, llms=()) -> None:
    """``analyze``'s output: JSON (each analysis with its training step, if any, and a decoder's
    step in LLM terms under ``llm``), or the per-layer tables, findings, the summary table, the
    decoder step's table and the training steps."""
    from benanza.reports.report import llm_table

    if json_out:
        docs = [r.to_dict() for r in results]
        for d, t in zip(docs, steps):
            d["training_step"] = t.to_dict()
        for d, lt in zip(docs, llms):
            if lt is not None:
                d["llm"] = lt
        _print_json(docs[0] if len(docs) == 1 else docs)
        return
    for note in dict.fromkeys(r.precision_note for r in results if r.precision_note):
        out.print(f"note: {note}", markup=False)  # first: the figures below are not fp8's
    out.print(f"system: {system.label()}", markup=False)
    if layers_table:
        for r in results:
            out.print(_analysis_table(r))
    _print_findings(results, database, system)
    out.print(_summary_table(results))
    for lt in llms:
        t = llm_table(lt)
        if t is not None:
            out.print(t)
    if steps:
        _print_training(steps, layers_table)


def _profile_and_batches(profile_dir: Optional[Path], model: Path, batch: str, dim, batch_dim, allow_mismatch: bool):
    """``analyze --profile DIR``: the framework profile (None without DIR) and the batch sizes to
    analyze (the profile's; a different ``--batch`` is a :class:`UsageError`)."""
    from benanza.processing.model import parse_batches

    if profile_dir is None:
        return None, parse_batches(batch)
    from benanza.profiles import load_profile
    from benanza.profiles.profile import read_profile_json

    pb = read_profile_json(profile_dir)["batch"]
    if batch != "1" and parse_batches(batch) != [pb]:
        raise UsageError(f"{profile_dir}: the profile was taken at batch {pb}; analyze --batch {pb}")
    return load_profile(profile_dir, model, pb, _parse_dims(dim), batch_dim, allow_mismatch), [pb]


def _conv_precision(conv_tf32: bool, precisions: list[str]) -> Optional[str]:
    """``tf32`` for ``--conv-tf32`` (valid with ``--dtype fp32`` alone), else None."""
    if not conv_tf32:
        return None
    if precisions != ["fp32"]:
        raise UsageError("--conv-tf32 goes with --dtype fp32 only (PyTorch's fp32 default: TF32 convolutions)")
    return "tf32"


def _print_findings(results, database, system) -> None:
    """Under the per-layer tables: layout conversions left out of the bound, layers where the
    framework's own kernel beats every library call, and layers far above their roofline bound."""
    from benanza.reports.chart import roofline_outliers as outliers

    for r in results:
        head = f"{r.model} batch {r.batch} {r.precision_label}"
        if r.conversion_layers:
            out.print(f"{head}: {len(r.conversion_layers)} layout-conversion Transposes left out of the bound "
                      f"(measured {r.conversion_ms:.4f} ms; layers {_ranges([t.layer.index for t in r.conversion_layers])})",
                      markup=False)
        sw = r.layout_switches
        if sw["count"]:
            out.print(f"{head}: {sw['count']} edges between layers whose best layouts differ "
                      f"({sw['bytes'] / 1e6:.2f} MB to convert; not counted)", markup=False)
        fast = r.framework_faster()
        if fast:
            t = FitTable(f"{head}: the framework's kernel beats every library call",
                         [Col("layers"), Col("what"), Col("framework call", "name"), Col("µs", "num"),
                          Col("best library call", "name", drop=1), Col("library µs", "num")])
            for f in sorted(fast, key=lambda f: -((f["library_ms"] or f["framework_ms"]) - f["framework_ms"])):
                t.add_row(_ranges(f["layers"]), f["what"], f["framework_call"], f"{f['framework_ms'] * 1e3:.1f}",
                          f["library_call"] or "none valid",
                          f"{f['library_ms'] * 1e3:.1f}" if f["library_ms"] is not None else "-")
            out.print(t)
        far = outliers(r, database, system)
        if far:
            t = FitTable(f"{head}: layers above {far[0]['factor']:g}x their roofline bound ({far[0]['ceilings']})",
                         [Col("#", "num"), Col("layer", "name"), Col("what", drop=2), Col("call", "name", drop=1),
                          Col("µs", "num"), Col("bound µs", "num"), Col("x bound", "num"),
                          Col("share of LBL", "num", drop=3)])
            for f in far[:15]:
                t.add_row(str(f["index"]), f["name"], f["what"], f["call"], f"{f['time_ms'] * 1e3:.1f}",
                          f"{f['bound_ms'] * 1e3:.2f}", f"{f['ratio']:.1f}", f"{100 * f['share']:.1f} %")
            out.print(t)
        from benanza.reports.counters import counters_table

        ct = counters_table(r, database, system)
        if ct is not None:
            out.print(ct)


def _ranges(ix: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``1-3,7``."""
    out, ix = [], sorted(ix)
    i = 0
    while i < len(ix):
        j = i
        while j + 1 < len(ix) and ix[j + 1] == ix[j] + 1:
            j += 1
        out.append(str(ix[i]) if i == j else f"{ix[i]}-{ix[j]}")
        i = j + 1
    return ",".join(out)


def _roofline_svg(analysis, system, database) -> tuple[str, str]:
    """The roofline chart of an analysis as inline SVG and where its roofs come from (the ceilings
    measured on the system when there are, else the spec table); ("", why) when the GPU is not in
    the spec table."""
    from benanza.reports.chart import model_roofline, svg_text
    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    try:
        spec = find_gpu(system.gpu_name)
    except UsageError as e:
        return "", str(e)
    measured = database.ceilings(system.id)
    kind, label = "spec", f"the {spec.name} datasheet figures (benanza/analysis/gpus.py)"
    if "dram_bandwidth" in measured:
        spec, kind = with_measured_ceilings(spec, measured), "measured"
        label = f"the ceilings `benanza ceilings` measured on this {spec.name}"
    return svg_text(model_roofline(analysis, spec, kind)), label


def _insight_docs(prof, results, ml, database, system, cache, layouts, phase=None) -> list[dict]:
    """The insights documents of ``results`` against profile ``prof`` (Q6 against fp32, or tf32 for
    an fp32 run, when the database has them); a decoder's (``phase``, or found by
    :func:`benanza.analysis.llm.decoder_phase`) with its step in LLM terms under ``llm``."""
    from benanza.analysis.analyzer import analyze as do_analyze
    from benanza.analysis.insights import build_insights
    from benanza.analysis.llm import llm_doc

    docs = []
    for a in results:
        other = None
        if a.precision in ("tf32", "fp16", "bf16"):
            other = do_analyze(ml, database, system, "fp32", cache, layouts)
        elif a.precision == "fp32":
            other = do_analyze(ml, database, system, "tf32", cache, layouts)
        if other is not None and not other.complete:  # the database lacks that precision
            other = None
        ins = build_insights(a, prof, database, system.id,
                             fp32=other if a.precision != "fp32" else None,
                             tensor_core=other if a.precision == "fp32" else None)
        d = ins.to_dict()
        lt = llm_doc(ml, a, database, system, d.get("latency_ms"), d.get("gpu_kernel_ms"), phase)
        if lt is not None:
            d["llm"] = lt
        docs.append(d)
    return docs


def _analyze_profile(prof, results, ml, database, system, cache, layouts, json_out, html_out) -> None:
    """``analyze --profile``: insights per precision (Q6 against fp32, or tf32 for an fp32 run,
    when the database has them), printed, as JSON and/or as HTML."""
    from benanza.reports.report import render_comparison, render_html, terminal_tables

    docs = _insight_docs(prof, results, ml, database, system, cache, layouts)
    if html_out is not None:
        if len(docs) == 1:
            svg, source = _roofline_svg(results[0], system, database)
            text = render_html(docs[0], svg, source)
        else:
            text = render_comparison(docs)
        from benanza.database.exports import write_atomic

        try:
            write_atomic(text.encode("utf-8"), html_out)  # whole or not at all
        except OSError as e:
            raise UsageError(f"{html_out}: cannot write the HTML report: {e.strerror or e}") from None
        if not json_out:
            err.print(f"HTML report written to {html_out}", markup=False)
    if json_out:
        _print_json(docs[0] if len(docs) == 1 else docs, default=str)
        return
    out.print(f"system: {system.label()}", markup=False)
    for d in docs:
        for n in d["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for t in terminal_tables(d):
            out.print(t)


@app.command()
@guarded
def report(inputs: list[Path] = typer.Argument(..., help="JSON files written by `benanza analyze --profile DIR --json`"),
           html_out: Optional[Path] = typer.Option(None, "--html", help="write a self-contained HTML comparison")):
    """Compare several analyses (models, batch sizes, data types or GPUs) side by side.

    Example: benanza report r50-fp16.json r50-fp32.json --html compare.html"""
    from benanza.reports.report import comparison_table, load_documents, render_comparison

    docs = load_documents(list(inputs))
    out.print(comparison_table(docs))
    if html_out is not None:
        try:
            html_out.write_text(render_comparison(docs), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{html_out}: cannot write the HTML report: {e.strerror or e}") from None
        err.print(f"HTML report written to {html_out}", markup=False)


TORCH_TRAIN_HELP = ("profile training steps (forward, loss, backward, optimizer step) and report the step's "
                    "Benanza ratio against `bench --train`'s training-step LBL")


def _torch_train_cmd(spec, batches, dtype, optimizer, db, output, device, bench, bench_args, seq, shape, warmup,
                     runs, iterations, force, channels_last, compile_mode, json_out, logs: bool = True) -> None:
    """``torch --train``: :func:`benanza.api.torch_train` with the steps' lines, then the report."""
    from benanza import api
    from benanza.reports.progress import Steps

    _check_optimizer(optimizer)
    with Steps(err, quiet=json_out) as say:
        comps = api.torch_train(spec, batches, dtype, optimizer, db, output, device, bench, bench_args, seq,
                                shape, warmup, runs, iterations, force, channels_last, compile_mode, say, logs=logs)
    _print_train_comparisons(comps, spec, json_out)


def _print_train_comparisons(comps, spec: str, json_out: bool) -> None:
    """``torch --train``: per profiled run, write ``report-...-train-OPT.json`` beside its profile
    folder and print the step's PyTorch kernel time per phase, benanza's training-step LBL and the
    Benanza ratios (INCOMPLETE marked), or the documents as a JSON list."""
    docs = []
    for c in comps:
        c.run["spec"] = spec  # (the headline names it)
        d = c.to_dict()
        folder = Path(c.run["folder"])
        (folder.parent / (folder.name.replace("profile-", "report-") + ".json")).write_text(
            json.dumps(d, indent=1, default=str))
        docs.append(d)
    if json_out:
        _print_json(docs, default=str)
        return
    for c, d in zip(comps, docs):
        pt, r = d["pytorch"], d["ratios"]
        for n in d["run"].get("notices") or []:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for n in pt["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        out.print(d["headline"], markup=False, soft_wrap=True)
        st = pt["step_kernel_ms"]
        t = FitTable(f"{spec} batch {c.run['batch']} {c.run['dtype']}, {c.run['label']}: PyTorch's training step "
                     f"(GPU kernel time, median of {pt['iterations']} iterations) against benanza's",
                     [Col("phase", "name"), Col("PyTorch", "num"), Col("IQR", "num", drop=2),
                      Col("benanza LBL", "num"), Col("ratio", "num"), Col("complete")])
        for p in ("forward", "loss", "backward", "optimizer"):
            q = pt["comparable_ms"][p]
            x = r[p]
            t.add_row(p, fmt_ms(q["median_ms"]), fmt_ms(q["iqr_ms"]),
                      fmt_ms(x["lbl_ms"]) if x["lbl_ms"] is not None else "not measured",
                      f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
                      "yes" if x["complete"] else Text("INCOMPLETE", style="red"))
        q = pt["comparable_ms"]["other"]
        t.add_row("other (zero_grad, outside)", fmt_ms(q["median_ms"]), fmt_ms(q["iqr_ms"]), "-", "-", "")
        x = r["step"]
        t.add_row("step", fmt_ms(st["median_ms"]), fmt_ms(st["iqr_ms"]), fmt_ms(x["lbl_ms"]),
                  f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
                  "yes" if x["complete"] else Text("INCOMPLETE", style="red"))
        out.print(t)
        ph = pt["phase_ms"]
        out.print("PyTorch phases (kernel ms, median): " + ", ".join(
            f"{p} {ph[p]['median_ms']:.4f}" for p in ph if ph[p]["median_ms"] is not None)
            + f"; memcpy {pt['step_memcpy_ms']['median_ms'] or 0:.4f}, memset {pt['step_memset_ms']['median_ms'] or 0:.4f}",
            markup=False)
        if d["run"].get("step_wall_ms"):
            w = d["run"]["step_wall_ms"]
            out.print(f"PyTorch step wall time ({w.get('method') or 'timed'}, outside the profiler): {w['median_ms']:.4f} ms "
                      f"(IQR {w['iqr_ms']:.4f})", markup=False)
        out.print(f"benanza training step: {c.step.lbl_text()}; sequential {c.step.sequential_ms:.4f} ms",
                  markup=False)
        out.print(c.ratio_text(), markup=False)
        for fc in d["framework_choices"]:
            out.print(f"framework: {fc['text']} ({fc['source']})", markup=False, soft_wrap=True)
        from benanza.reports.report import train_whatif_table

        wt = train_whatif_table(d)
        if wt is not None:
            out.print(wt)
        lt = FitTable("layers by PyTorch's kernel time (forward + backward, the 12 heaviest; all in the report)",
                      [Col("layer", "name"), Col("PyTorch fwd", "num"), Col("PyTorch bwd", "num"),
                       Col("benanza bwd", "num"), Col("backward nodes", "name", drop=1)])
        for row in sorted(d["layers"], key=lambda x: -(x["forward_ms"] + x["backward_ms"]))[:12]:
            lt.add_row(row["name"], fmt_ms(row["forward_ms"]), fmt_ms(row["backward_ms"]),
                       fmt_ms(row["lbl_backward_ms"]) if row["lbl_backward_ms"] is not None else "-",
                       ", ".join(row["backward_nodes"]))
        out.print(lt)
        un = pt["unjoined"]
        if un:
            tot = sum(u["ms"] for u in un)
            out.print(f"kernels joined to no layer: {len(un)} kinds, {tot:.4f} ms per step (heaviest: "
                      + "; ".join(f"{u['role']} {u['node'] or u['forward_op'] or ''} {u['ms']:.4f} ms" for u in un[:3])
                      + ")", markup=False)
        f = Path(c.run["folder"])
        out.print(f"report in {f.parent / (f.name.replace('profile-', 'report-') + '.json')}", markup=False)


def _print_training(steps, calls_table: bool) -> None:
    """``--train``: each training step's backward calls (with ``calls_table``), its phases, and its
    headline (:meth:`benanza.analysis.training.TrainingStep.lbl_text`), INCOMPLETE marked."""
    for t in steps:
        if calls_table and t.calls:
            ct = FitTable(f"{t.model} batch {t.batch} {t.precision_label}: backward calls (ms)",
                          [Col("layer", "name"), Col("phase", "name"), Col("kind", "name"),
                           Col("config", "text", drop=3), Col("ms", "num"), Col("call", "name", drop=2),
                           Col("algorithm", "token", drop=1)])
            for c in t.calls:
                ct.add_row(c.layer_name, c.phase.replace("backward_", ""), c.kind, c.description,
                           f"{c.time_ms:.4f}" if c.time_ms is not None else Text("missing", style="red"),
                           c.call, c.algorithm)
            out.print(ct)
    st = FitTable("training step LBL, ms: forward + backward, critical path; partial sums marked incomplete",
                  [Col("model", "name"), Col("batch", "num"), Col("dtype", "name"), Col("LBL ms", "num"),
                   Col("sequential ms", "num", drop=2), Col("forward ms", "num", drop=1),
                   Col("loss ms", "num", drop=3), Col("bwd data ms", "num", drop=1), Col("bwd weight ms", "num", drop=1),
                   Col("optimizer ms", "num", drop=3), Col("complete")])
    for t in steps:
        mark = "" if t.complete else " incomplete"
        ph = t.phase_ms
        st.add_row(t.model, str(t.batch), t.precision_label, f"{t.critical_path_ms:.4f}{mark}",
                   f"{t.sequential_ms:.4f}{mark}", f"{ph['forward']:.4f}",
                   f"{ph['loss']:.4f}" if ph.get("loss") is not None else
                   ("not measured" if not t.loss_measured else "not counted"), f"{ph['backward_data']:.4f}",
                   f"{ph['backward_weight']:.4f}",
                   f"{ph['optimizer']:.4f}" if ph["optimizer"] is not None else "not measured",
                   "yes" if t.complete else Text(f"no: {t.missing_count} missing", style="red"))
    out.print(st)
    for t in steps:
        out.print(f"training step {t.model} batch {t.batch} {t.precision_label}: {t.lbl_text()}", markup=False)
        if t.memory is not None:
            m, gib = t.memory, 2 ** 30
            out.print(f"  peak memory >= {m.total / gib:.2f} GiB: parameters {m.parameters / gib:.2f} "
                      f"({m.parameter_count:,} elements), gradients {m.gradients / gib:.2f}, {m.optimizer} state "
                      f"{m.optimizer_state / gib:.2f}, saved activations {m.activations / gib:.2f}, workspace "
                      f"{m.workspace / gib:.2f} GiB", markup=False)
            no = m.cannot_fit()
            out.print("  cannot fit on: " + ", ".join(f"{g.name} ({g.memory_bytes / gib:.0f} GiB)" for g in no)
                      if no else "  may fit on every GPU `benanza predict` knows (the bound is below each one's memory)",
                      markup=False)
        for n in t.notes:
            out.print(f"  note: {n}", markup=False)


def _summary_table(results) -> FitTable:
    """One row per analysis: the headline LBL (fused, critical path) first, then the fused
    sequential and the unfused figures; an incomplete analysis shows partial sums, marked."""
    t = FitTable("lower-bound latency (LBL), ms: fused, critical path; partial sums marked incomplete",
                 [Col("model", "name"), Col("batch", "num"), Col("dtype", "name"), Col("layouts", "name", drop=4),
                  Col("LBL ms", "num"), Col("fused seq ms", "num", drop=3), Col("unfused par ms", "num", drop=2),
                  Col("unfused seq ms", "num", drop=1), Col("layers measured", drop=5), Col("complete")])
    for r in results:
        d = r.to_dict()
        miss = ", ".join(f"{op} x{n}" for op, n in d["missing_by_op"].items())
        mark = "" if r.complete else " incomplete"
        umark = "" if r.complete_unfused else " incomplete"
        t.add_row(r.model, str(r.batch), r.precision_label, "+".join(x.lower() for x in r.layouts),
                  f"{r.lbl_ms:.4f}{mark}", f"{r.lbl_fused_sequential_ms:.4f}{mark}",
                  f"{r.lbl_parallel_ms:.4f}{umark}", f"{r.lbl_sequential_ms:.4f}{umark}",
                  f"{d['measured_layers']} (+{d['zero_cost_layers']} zero-cost)",
                  "yes" if r.complete else Text(f"no: {miss}", style="red"))
    return t


# --------------------------------------------------------------------------- predict and roofline

def _print_notices(lb, json_out: bool) -> None:
    """A lower bound's notices (the model's, the system resolver's, the spec table's) on stderr."""
    if not json_out:
        for n in lb.notices:
            err.print(f"notice: {n}", markup=False)


@app.command()
@guarded
def predict(model: Path = typer.Argument(..., help="ONNX model file"),
            batch: int = typer.Option(1, "--batch", "-b", help="batch size"),
            dtype: str = typer.Option("fp32", "--dtype", "-t", help="data type: fp32, tf32, fp16, bf16, fp8"),
            origin: Optional[str] = typer.Option(None, "--from", help="measured system: id, fingerprint prefix or "
                                                 "GPU name (as analyze --system)"),
            target: str = typer.Option(..., "--to", help="GPU to predict for, from the spec table "
                                       "(e.g. h100-sxm, A100, L4, B200)"),
            db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
            memory: str = typer.Option("l2", "--memory", help="memory term: l2 (warm working sets that fit "
                                       "the L2 scale with SMs x clock, the rest with DRAM bandwidth) or dram "
                                       "(Habitat's: all with DRAM bandwidth)"),
            json_out: bool = typer.Option(False, "--json", help="the prediction per layer as JSON on stdout"),
            layout: str = typer.Option("nchw,nhwc", "--layout", help=LAYOUT_HELP),
            train: bool = typer.Option(False, "--train", help="predict the training step (forward, loss, "
                                       "backward, optimizer; from `benanza bench --train`'s measurements) and "
                                       "whether its memory fits the target"),
            optimizer: Optional[str] = typer.Option(None, "--optimizer", help="with --train: " + OPTIMIZER_HELP
                                                    + " (default sgd)")):
    """Predict MODEL's LBL on a GPU you do not have from its measurements on one you do (Habitat
    wave scaling, USENIX ATC 2021, with datasheet figures). --train: its training step.

    Example: benanza predict resnet50.onnx --batch 32 --dtype fp16 --from H200 --to A100-SXM4-80GB --db perf.db"""
    from benanza import api

    if optimizer is not None and not train:
        raise UsageError("--optimizer goes with --train (the optimizer of the predicted training step)")
    if train:
        _check_optimizer(optimizer or "sgd")
        lb, tp = api.predict_training(api.Scenario.of(model, batch, dtype, layout, system=origin), target, db,
                                      memory, optimizer or "sgd")
        _print_notices(lb, json_out)
        return _print_training_prediction(tp, memory, json_out)
    lb, p = api.predict(api.Scenario.of(model, batch, dtype, layout, system=origin), target, db, memory)
    a = lb.analysis
    _print_notices(lb, json_out)
    from benanza.analysis.predict import error_bar, load_error_table

    table = load_error_table()
    eb = error_bar(p, table) if table else None
    if json_out:
        _print_json({**p.to_dict(), "error_bar": eb.to_dict() if eb else None})
        return
    t = FitTable(f"{a.model} batch {a.batch} {dtype}: {p.origin.name} (measured) -> {p.target.name} (predicted)",
                 [Col("layer kind", "name"), Col("layers", "num"), Col(f"{p.origin.name} ms", "num"),
                  Col(f"{p.target.name} ms", "num"), Col("ratio", "num")])
    for kind, v in p.by_kind().items():
        t.add_row(kind, str(v["layers"]), f"{v['origin_ms']:.4f}", f"{v['predicted_ms']:.4f}",
                  f"{v['ratio']:.3f}" if v["ratio"] else "-")
    out.print(t)
    note = f" {a.incomplete_note}" if a.incomplete_note else ""
    out.print(f"LBL ({a.lbl_name}): {p.origin_lbl_ms:.4f} ms measured on {p.origin.name} -> {p.lbl_ms:.4f} ms "
              f"predicted on {p.target.name}{note}", markup=False)
    out.print(f"unfused, per layer: sequential {p.origin_lbl_sequential_ms:.4f} -> {p.lbl_sequential_ms:.4f} ms, "
              f"critical path {p.origin_lbl_parallel_ms:.4f} -> {p.lbl_parallel_ms:.4f} ms"
              + ("" if p.complete else " (partial sums: layers without a measurement)"), markup=False)
    out.print(_error_bar_line(eb, dtype), markup=False, highlight=False)
    out.print(f"method: Habitat wave scaling, {memory} memory term; figures from the spec table ({p.target.source})", markup=False,
              highlight=False)


def _print_training_prediction(tp, memory: str, json_out: bool) -> None:
    """``predict --train``: per phase the origin's measured and the target's predicted time, the
    step's sequential and critical-path totals (INCOMPLETE marked), whether its memory fits, and the
    error bar its calls' kinds and phases were measured to (db/reference/predict_train_errors.json)."""
    from benanza.analysis.predict_training import load_train_error_table, training_error_bar

    table = load_train_error_table()
    eb = training_error_bar(tp, table) if table else None
    if json_out:
        _print_json({**tp.to_dict(), "error_bar": eb.to_dict() if eb else None})
        return
    s, o, d = tp.step, tp.origin.name, tp.target.name
    mark = "" if tp.complete else " incomplete"
    t = FitTable(f"{s.model} batch {s.batch} {s.precision_label} training step ({tp.optimizer}): {o} (measured) -> "
                 f"{d} (predicted)", [Col("phase", "name"), Col(f"{o} ms", "num"), Col(f"{d} ms", "num"),
                                      Col("ratio", "num")])

    def cell(v, why):
        return f"{v:.4f}" if v is not None else why

    partial = {c.phase for c in tp.calls if c.predicted_ms is None} | ({"forward"} if s.forward_missing else set())
    for ph in ("forward", "loss", "backward_data", "backward_weight", "optimizer"):
        mo, md = s.phase_ms.get(ph), tp.phase_ms.get(ph)
        why = "not measured" if ph == "optimizer" or (ph == "loss" and not s.loss_measured) else "not counted"
        pm = " incomplete" if ph in partial and mo is not None else ""
        t.add_row(ph, cell(mo, why) + pm, cell(md, why) + pm, f"{md / mo:.3f}" if mo and md is not None else "-")
    for name, mo, md in (("sequential", s.sequential_ms, tp.sequential_ms),
                         ("critical path (LBL)", s.critical_path_ms, tp.critical_path_ms)):
        t.add_row(name, f"{mo:.4f}{mark}", f"{md:.4f}{mark}", f"{md / mo:.3f}" if mo else "-")
    out.print(t)
    note = f" {tp.incomplete_note}" if tp.incomplete_note else ""
    out.print(f"training step ({s.lbl_name}): {s.critical_path_ms:.4f} ms measured on {o} -> "
              f"{tp.critical_path_ms:.4f} ms predicted on {d}{note}", markup=False)
    if tp.memory_bytes is not None:
        gib = 2 ** 30
        verdict = ("may fit (the bound leaves out what frameworks add)" if tp.fits
                   else "does NOT fit: the step cannot run as it is (batch, precision, optimizer)")
        out.print(f"memory: peak >= {tp.memory_bytes / gib:.2f} GiB against {d}'s {tp.target.memory_bytes / gib:.1f} "
                  f"GiB: {verdict}", markup=False)
    for n in tp.notes:
        out.print(f"note: {n}", markup=False)
    out.print(_error_bar_line(eb, tp.step.forward.precision, "its call kinds and phases", "predict_train_errors.json",
                              "step"), markup=False, highlight=False)
    out.print(f"method: Habitat wave scaling of every call of the step, {memory} memory term; figures from the spec "
              f"table ({tp.target.source})", markup=False, highlight=False)


def _error_bar_line(eb, dtype: str, what: str = "its layer kinds", table: str = "predict_errors.json",
                    mean_of: str | None = None) -> str:
    """The error bar of a prediction in one line (benanza.analysis.predict.error_bar,
    benanza.analysis.predict_training.training_error_bar): ``what`` the prediction's parts the
    table's errors are per, ``table`` the validation table's file name under db/reference,
    ``mean_of``: say the validation's mean |error| of this (``step``), None: not said."""
    if eb is None:
        return f"error bar: none (no validation table, db/reference/{table}, in this install)"
    never = f"; never validated in {dtype}: {', '.join(eb.unvalidated)} ({eb.unvalidated_share:.0%} of the time)" \
        if eb.unvalidated else ""
    if eb.relative is None:
        return f"error bar: none -- none of {what} was validated in {dtype}{never}"
    scope = (f"; validated on {', '.join(eb.architectures)} GPUs only: this prediction leaves them, so the error "
             "can be larger") if eb.extrapolated else ""
    step = (f"; the validation's mean |{mean_of} error| in {dtype}: {eb.model_mean_abs_error:.1%}"
            if mean_of and eb.model_mean_abs_error is not None else "")
    return (f"error bar: +/-{eb.relative:.1%} (the errors measured for {what} in {dtype}, weighted by time; "
            f"90th percentile +/-{eb.worst:.1%}){step}{never}{scope}; validation: {eb.source}")


#: the roofline table's columns; in a narrow terminal the peak goes first, then roof, kind, MB and GFLOP
ROOFLINE_COLUMNS = (Col("#", "num"), Col("layer", "name"), Col("kind", "name", drop=4), Col("GFLOP", "num", drop=2),
                    Col("MB", "num", drop=3), Col("FLOP/B", "num"), Col("roof", "name", drop=5),
                    Col("peak", "name", drop=6), Col("bound µs", "num"), Col("best µs", "num"),
                    Col("efficiency", "num"))


@app.command()
@guarded
def roofline(model: Path = typer.Argument(..., help="ONNX model file"),
             batch: int = typer.Option(1, "--batch", "-b", help="batch size"),
             dtype: str = typer.Option("fp32", "--dtype", "-t", help="data type: fp32, tf32, fp16, bf16, fp8"),
             db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
             system_spec: Optional[str] = typer.Option(None, "--system", help="system id, fingerprint prefix or GPU name"),
             ceilings: str = typer.Option("spec", "--ceilings", help="spec (datasheet figures) or measured"),
             png: Optional[Path] = typer.Option(None, "--png", help="write the roofline chart as PNG"),
             svg: Optional[Path] = typer.Option(None, "--svg", help="write the roofline chart as SVG"),
             json_out: bool = typer.Option(False, "--json", help="the roofline of every layer as JSON on stdout"),
             kind: str = typer.Option("classic", "--kind", help="classic (achieved FLOP/s against FLOP/byte, one "
                                      "point per layer) or time (time against FLOPs and against bytes, every "
                                      "measured implementation of each layer; Wang et al. 2020)"),
             layout: str = typer.Option("nchw,nhwc", "--layout", help=LAYOUT_HELP + "; the time chart draws "
                                        "every layout measured")):
    """Roofline bound and library efficiency (bound / best measured) of every layer of MODEL, and the
    roofline chart (--kind classic) or the time-based roofline of every implementation (--kind time).

    Example: benanza roofline resnet50.onnx --batch 32 --dtype fp16 --db perf.db --kind time --svg roofline.svg"""
    from benanza import api
    from benanza.database.store import open_db
    from benanza.reports.chart import LAUNCH_FLOOR_US, render

    if kind not in ("classic", "time"):
        raise UsageError(f"--kind must be classic or time, got {kind!r}")
    for flag, path in (("--png", png), ("--svg", svg)):
        _check_output_file(flag, path)
    database = open_db(db, create=False)
    lb, mr, spec = api.roofline(api.Scenario.of(model, batch, dtype, layout, system=system_spec), database, ceilings)
    a, system, l2 = lb.analysis, lb.system, mr.l2
    _print_notices(lb, json_out)
    if kind == "time":
        from benanza.reports.time_chart import print_time_roofline, render_time, time_roofline

        tr = time_roofline(a, database, system, spec, l2, ceilings)
        print_time_roofline(tr, render_time(tr, png, svg) if (png or svg) else [], out, json_out)
        return
    written = render(mr, png, svg) if (png or svg) else []
    if json_out:
        d = mr.to_dict()
        d["charts"] = [str(p) for p in written]
        from benanza.reports.counters import counter_rows

        d["counters"] = counter_rows(a, database, system)
        _print_json(d)
        return
    what = "datasheet figures, not measured on this GPU" if ceilings == "spec" else "measured by `benanza ceilings`"
    t = FitTable(f"{a.model} batch {a.batch} {dtype} on {mr.gpu.name}: roofline ({ceilings} ceilings: {what})",
                 ROOFLINE_COLUMNS)
    for x in mr.layers:
        t.add_row(str(x.index), x.name, x.kind, f"{x.flops / 1e9:.3f}", f"{x.bytes / 1e6:.2f}", f"{x.intensity:.1f}",
                  x.limit, x.peak, f"{x.bound_ms * 1e3:.1f}", f"{x.measured_ms * 1e3:.1f}", f"{x.efficiency:.0%}")
    out.print(t)
    out.print(f"LBL {a.lbl_text()}", markup=False)
    out.print(f"roofline bound of the layers: {mr.bound_sequential_ms:.4f} ms sequential, {mr.bound_parallel_ms:.4f} ms "
              f"parallel; with the {LAUNCH_FLOOR_US:g} µs launch floor {mr.attainable_sequential_ms:.4f} ms; library "
              f"efficiency {mr.efficiency:.1%} (bound / the layers' measured sum, {mr.lbl_sequential_ms:.4f} ms "
              f"unfused)", markup=False)
    out.print(f"ceilings: {mr.gpu.source}", markup=False, highlight=False)
    from benanza.reports.counters import counters_table

    ct = counters_table(a, database, system)
    if ct is not None:
        out.print(ct)
    for p in written:
        out.print(f"wrote {p}", markup=False)


# ------------------------------------------------------------------------------------------- bench

@app.command()
@guarded
def bench(model: Optional[list[Path]] = typer.Argument(None, help="ONNX model file(s): several make a zoo, "
                                                       "one suite of their unique jobs"),
          models_file: Optional[Path] = typer.Option(None, "--models-file", help="models to bench, one path per line "
                                                     "(relative to the file; # starts a comment line)"),
          batch: str = typer.Option("1", "--batch", "-b", help="batch sizes, e.g. 1,32"),
          dtype: str = typer.Option("fp32", "--dtype", "-t", help="data types: fp32 (FMA), tf32, fp16, bf16, fp8 (FP8 GEMMs, the rest fp16)"),
          db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="suite folder (default: a cache folder)"),
          layout: str = typer.Option("nchw,nhwc", "--layout", help=LAYOUT_HELP),
          kinds: Optional[str] = typer.Option(None, "--kinds", help="only these layer kinds, e.g. Activation,Elementwise "
                                              "(with --force: measure again what a harness change touched)"),
          force: bool = typer.Option(False, "--force", help="measure again what the database already has"),
          retry_failed: bool = typer.Option(False, "--retry-failed", help="run again the jobs that failed"),
          warmup_ms: float = typer.Option(TIMING.warmup_ms, "--warmup-ms", help=WARMUP_HELP),
          rse: float = typer.Option(TIMING.rse, "--rse", help=RSE_HELP),
          min_samples: int = typer.Option(TIMING.min_samples, "--min-samples", help=MIN_SAMPLES_HELP),
          max_samples: int = typer.Option(TIMING.max_samples, "--max-samples", help=MAX_SAMPLES_HELP),
          max_time_ms: float = typer.Option(TIMING.max_time_ms, "--max-time-ms", help=MAX_TIME_HELP),
          workspace_mb: float = typer.Option(TIMING.workspace_mb, "--workspace-limit-mb", help=WORKSPACE_HELP),
          cold: str = typer.Option(TIMING.cold, "--cold", help=COLD_HELP),
        no_cold: bool = typer.Option(False, "--no-cold", help=NO_COLD_HELP),
        exhaustive: bool = typer.Option(False, "--exhaustive", help=EXHAUSTIVE_HELP),
        workers_per_gpu: int = typer.Option(TIMING.workers_per_gpu, "--workers-per-gpu", help=WORKERS_HELP),
          screen: float = typer.Option(TIMING.screen, "--screen", help=SCREEN_HELP),
          max_engines: int = typer.Option(TIMING.max_engines, "--max-engines", help=MAX_ENGINES_HELP),
          device: int = typer.Option(0, "--device", help=DEVICE_HELP),
          devices: Optional[str] = typer.Option(None, "--devices", help="several identical GPUs: 'all' or 0,1,..."),
          job_timeout: float = typer.Option(TIMING.job_timeout, "--job-timeout", help=JOB_TIMEOUT_HELP),
          layers_table: bool = typer.Option(True, "--layers/--no-layers", help="print the per-layer tables"),
          quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
          json_out: bool = typer.Option(False, "--json", help="stages, run and analyses as JSON on stdout (no "
                                        "progress)"),
          conv_tf32: bool = typer.Option(False, "--conv-tf32", help=CONV_TF32_HELP),
          torch: Optional[bool] = typer.Option(None, "--torch/--no-torch", help=TORCH_HELP),
          dim: Optional[list[str]] = typer.Option(None, "--dim", help=DIM_HELP),
          batch_dim: Optional[int] = typer.Option(None, "--batch-dim", help=BATCH_DIM_HELP),
          counters: bool = typer.Option(False, "--counters", help="then profile each layer's best implementation "
                                        "once with Nsight Compute (ncu on PATH) and store its DRAM and SM "
                                        "throughput, achieved occupancy, launch shape and kernel names (with "
                                        "--train, each measured call of the step too)"),
          train: bool = typer.Option(False, "--train", help=TRAIN_HELP),
          optimizer: str = typer.Option("sgd", "--optimizer", help=OPTIMIZER_HELP),
          cluster: Optional[str] = typer.Option(None, "--cluster", help=CLUSTER_HELP),
          gpu_kinds: Optional[str] = typer.Option(None, "--gpu-kinds", help=GPU_KINDS_HELP)):
    """All of it: process, generate, compile, run on the GPU, store, and print the LBL. Several
    models (a zoo): one suite of their unique jobs, each measured once, then each model's LBL.

    Example: benanza bench resnet50.onnx --batch 1,32 --dtype fp16 --db perf.db"""
    from benanza import api
    from benanza.processing.model import parse_batches

    ncu = _require_ncu() if counters else None  # before any work
    model = api.model_list(model, models_file)
    gkinds = api.cluster_kinds(cluster, gpu_kinds)
    if counters and cluster:
        raise UsageError("--counters with --cluster: Nsight Compute profiles on this machine's GPU")
    _check_optimizer(optimizer)
    timing = api.Timing(warmup_ms, rse, min_samples, max_samples, max_time_ms, workspace_mb, cold, no_cold, exhaustive,
                        workers_per_gpu, screen, max_engines, device, devices, job_timeout, force, retry_failed)
    timing.run_options()  # every option checked before any work
    say = (lambda m: None) if (quiet or json_out) else (lambda m: err.print(m, markup=False, highlight=False))
    r = api.bench(model, parse_batches(batch), dtype, layout, timing, db, output, kinds, torch, conv_tf32,
                  _parse_dims(dim), batch_dim, quiet or json_out, say, train=train, optimizer=optimizer,
                  cluster=cluster, gpu_kinds=gkinds)
    stages, results, system, database = r.stages, r.analyses, r.system, r.database
    steps = r.training
    counters_doc = _bench_counters(ncu, results, r.suite, database, system, timing.run_options(), force, say, stages,
                                   steps) if counters else None
    if json_out:
        return _print_bench_json(r, counters_doc, bool(cluster))
    if layers_table:
        for r in results:
            out.print(_analysis_table(r))
        _print_findings(results, database, system)
    out.print(_summary_table(results))
    if train:
        _print_training(steps, layers_table)
    out.print("stages: " + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in stages.items()), markup=False)


def _print_bench_json(r, counters_doc: dict | None, cluster: bool) -> None:
    """``bench --json``: the model, stages, counters, the runs (each cluster kind's too) and each analysis
    with its training step, as ``analyze --json`` gives them."""
    docs = [a.to_dict() for a in r.analyses]
    for d, t in zip(docs, r.training):
        d["training_step"] = t.to_dict()
    _print_json({"model": r.model, "stages": r.stages, "counters": counters_doc, "run": _run_doc(r.run),
                 "framework_run": _run_doc(r.framework_run) if r.framework_run is not None else None,
                 "cluster_runs": [_run_doc(s) for s in r.runs] if cluster else None,
                 "system": r.analyses[0].system if r.analyses else None, "analyses": docs})


def _require_ncu() -> str:
    """Nsight Compute's ncu for ``bench --counters``, or :class:`UsageError` in one line."""
    from benanza.runner.counters import find_ncu

    return find_ncu()


def _bench_counters(ncu, results, suite, database, system, opts, force: bool, say, stages: dict,
                    steps=()) -> dict:
    """``bench --counters``: the best implementation of every measured layer (with ``--train``, of
    every measured call of the training ``steps`` too) profiled once with Nsight Compute and stored
    (:func:`benanza.runner.counters.profile_best`); what was done, as JSON."""
    from benanza.build.builder import suite_executable
    from benanza.runner.counters import profile_best

    t = time.perf_counter()
    run = profile_best(results, suite.jobs, suite_executable(suite.root), database, system.id,
                       opts.suite_args(opts.gpus()[0]), ncu, force, say, steps)
    stages["counters_s"] = time.perf_counter() - t
    say(run.line())
    return {"profiled": run.profiled, "stored": run.stored, "framework_kernels": run.framework,
            "failures": [{"layer": n, "reason": w} for n, w in run.failures]}


@app.command()
@guarded
def worker(scheduler: str = typer.Option(..., "--scheduler", help="the Dask scheduler's address, tcp://HOST:PORT"),
           devices: Optional[str] = typer.Option(None, "--devices", help="the GPUs to serve: 'all' (default) or 0,1,..."),
           workers_per_gpu: int = typer.Option(3, "--workers-per-gpu",
                                               help="suite processes per GPU, taking turns on it (one builds engine "
                                                    "plans while another times calls)")):
    """Serve this host's GPUs to a Dask cluster (pip install benanza[cluster]): one worker per GPU,
    pinned to it and declaring its GPU kind, until Ctrl-C. Jobs come from `bench`/`run --cluster`.

    Example: benanza worker --scheduler tcp://10.0.0.1:8786"""
    from benanza import api

    api.serve_workers(scheduler, devices, workers_per_gpu)


# ------------------------------------------------------------------------------------------ system

@app.command()
@guarded
def ceilings(db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
             device: int = typer.Option(0, "--device", help=DEVICE_HELP),
             output: Optional[Path] = typer.Option(None, "-o", "--output", help="suite folder (default: a cache folder)"),
             json_out: bool = typer.Option(False, "--json", help="the ceilings as JSON on stdout")):
    """Measure this GPU's ceilings (DRAM bandwidth, GEMM rate per data type, FP32 FMA rate) and
    store them with the system: the roofs of the roofline.

    Example: benanza ceilings --db perf.db"""
    from benanza.runner import ceilings as C
    from benanza.database.store import open_db

    database = open_db(db)
    folder = output or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "suites" / "ceilings"
    from benanza import api

    br = api.build_with_progress(C.generate_suite(folder), None, json_out)
    system, rows, failed = C.measure(br.executable, device)
    sid = database.upsert_system(system)
    database.write_ceilings(sid, [r.to_row() for r in rows])
    if json_out:
        _print_json({"system": system.get("gpu_name"), "ceilings": [r.to_row() for r in rows],
                                   "failed": failed})
        return
    t = FitTable(f"ceilings, {system.get('gpu_name')}", [Col("ceiling", "name"), Col("value", "num"),
                                                          Col("median ms", "num", drop=1), Col("rse", "num", drop=2),
                                                          Col("what")])
    for r in rows:
        scale, unit = (1e12, "TB/s") if r.unit == "bytes/s" else (1e12, "TFLOP/s")
        t.add_row(r.name, f"{r.value / scale:.2f} {unit}", f"{r.median_ms:.4f}",
                  f"{r.rse:.2%}" if r.rse is not None else "-", C.CEILINGS.get(r.name, ""))
    out.print(t)
    for f in failed:
        err.print(f"failed: {f}", markup=False)


@app.command()
@guarded
def system(json_out: bool = typer.Option(False, "--json", help="devices and libraries as JSON on stdout")):
    """Describe the CUDA devices here and the cuDNN/cuBLAS benanza would use.

    Example: benanza system --json"""
    from benanza.runner import system as sysq

    info = sysq.describe()
    if json_out:
        _print_json(info)
        return
    for d in info["devices"]:
        out.print(f"GPU {d['index']}: {d['gpu_name']}, sm_{d['compute_capability'].replace('.', '')}, "
                  f"{d['sm_count']} SMs, {d['memory_bytes'] / 2**30:.1f} GiB, max SM clock {d['max_sm_clock_mhz']} MHz, "
                  f"driver {d['driver_version'] or d['driver_cuda_version']}", markup=False)
    if info.get("device_error"):
        out.print(info["device_error"], markup=False, soft_wrap=True)
    for k, lib in (("cudnn_library", ""), ("cudnn_version", "cudnn"), ("cublas_library", ""),
                   ("cublas_version", "cublas"), ("nvcc", "")):
        v = info.get(k)
        out.print(f"{k}: {version_text(lib, v) if lib else v}", markup=False, soft_wrap=True)


# ---------------------------------------------------------------------------------------------- db

def _emit(rows: list[dict], fmt: str, title: str, columns: list[Col | str] | None = None) -> None:
    """Rows as a table, CSV or JSON (a list of records) on stdout. ``columns``: the table's, by row
    key (a :class:`Col` whose header is the key, or the key); a ``*_ms`` column shows times with
    their unit (ms or µs) under the key without ``_ms``. CSV and JSON keep every key and raw value
    (in CSV, a list or dict value is its JSON text)."""
    fmt = fmt.lower()
    if fmt == "json":
        _print_json(rows, default=str)
        return
    specs = [c if isinstance(c, Col) else Col(c) for c in (columns or (list(rows[0].keys()) if rows else []))]
    cols = [c.header for c in specs]
    if fmt == "csv":
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0].keys()) if rows else cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:  # a list or dict column (details, params) as JSON, never a Python repr
            w.writerow({k: json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else v
                        for k, v in r.items()})
        return
    if fmt != "table":
        raise UsageError(f"--format must be table, csv or json, not {fmt!r}")
    t = FitTable(title, [Col(c.header[:-3], "num", c.drop) if c.header.endswith("_ms") else c for c in specs])
    for r in rows:
        t.add_row(*[_cell(r.get(c), c) for c in cols])
    out.print(t)


def _cell(v, key: str = "") -> str:
    if key.endswith("_ms"):
        return fmt_ms(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if key == "ratio" else f"{v:.6g}"
    return str(v)


def _db_notices(database) -> None:
    for n in database.notices:
        err.print(f"notice: {n}", markup=False, soft_wrap=True)


FORMAT_HELP = "table, csv or json"


@db_app.command("systems")
@guarded
def db_systems(db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
               fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
               json_out: bool = typer.Option(False, "--json", help="same as --format json")):
    """The systems measured, with their versions and measurement counts.

    Example: benanza db systems --db db/reference/h200.sqlite.gz"""
    from benanza.database import query
    from benanza.database.store import open_db

    database = open_db(db, create=False)
    _db_notices(database)
    rows = query.systems(database)
    fmt = "json" if json_out else fmt
    for r in rows:
        r["fingerprint"] = r["fingerprint"][:12]
        if fmt != "json":  # JSON keeps the libraries' integers
            for k, lib in (("cudnn_version", "cudnn"), ("cublas_version", "cublas"), ("runtime_version", "cuda")):
                r[k] = version_text(lib, r.get(k))
    _emit(rows, fmt, f"systems in {database.safe_url}",
          [Col("id", "num"), Col("fingerprint", "name", drop=5), Col("gpu_name", "name"),
           Col("compute_capability", "name", drop=2), Col("sm_count", "num", drop=1),
           Col("driver_version", "name", drop=4), Col("runtime_version", "name", drop=3), Col("cudnn_version", "name"),
           Col("cublas_version", "name"), Col("measurements", "num"), Col("valid", "num", drop=6)])


def _params(items: list[str] | None) -> dict[str, str]:
    outp = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise UsageError(f"--param {it!r}: expected NAME=VALUE (e.g. group=1, x=32x64x56x56)")
        outp[k] = v
    return outp


@db_app.command("query")
@guarded
def db_query(db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
             system: Optional[str] = typer.Option(None, "--system", help="id, fingerprint prefix or GPU name"),
             model: Optional[str] = typer.Option(None, "--model", help="ONNX file or a model name in the database"),
             kind: Optional[list[str]] = typer.Option(None, "--kind", help="layer kind (Conv, Gemm, ...)"),
             param: Optional[list[str]] = typer.Option(None, "--param", help="config field: NAME=VALUE"),
             batch: Optional[int] = typer.Option(None, "--batch", help="with --model: the model's batch size (its "
                                                 "layer configs at that batch); without: the layer configs' batch count "
                                                 "(dim 0 of the first input; a GEMM's number of products)"),
             dtype: Optional[str] = typer.Option(None, "--dtype", help="precision: fp32, tf32, fp16, bf16, fp8"),
             math: Optional[str] = typer.Option(None, "--math", help="fma, tf32, tensor_op, none"),
             call: Optional[str] = typer.Option(None, "--call", help="library call contains"),
             algorithm: Optional[str] = typer.Option(None, "--algorithm", help="algorithm or engine contains"),
             status: Optional[str] = typer.Option(None, "--status", help="ok, not_supported, skipped, failed"),
             cache: Optional[str] = typer.Option(None, "--cache", help="warm or cold"),
             best: bool = typer.Option(False, "--best", help="only the fastest valid measurement per layer config"),
             sort: str = typer.Option("median_ms", "--sort", help="field to sort by, e.g. median_ms, kind, "
                                      "algorithm"),
             desc: bool = typer.Option(False, "--desc", help="sort descending"),
             limit: Optional[int] = typer.Option(None, "--limit", help="at most this many rows"),
             fmt: str = typer.Option("table", "--format", help=FORMAT_HELP)):
    """Measurements filtered by system, model, layer kind, config fields, data type, math, algorithm,
    batch, status; sorted; as a table, CSV or JSON (a list of measurement records).

    Example: benanza db query --model resnet50.onnx --batch 32 --best --dtype fp16 --format csv"""
    from benanza.database import query
    from benanza.database.store import open_db

    if dtype:
        Precision.of(dtype)
    database = open_db(db, create=False)
    _db_notices(database)
    f = query.Filters(system=system, model=model, model_batch=batch, kind=kind, params=_params(param),
                      precision=None if best else dtype, math=math, call=call, algorithm=algorithm,
                      # one meaning of batch: with --model it selects the model's configs (a GEMM of
                      # ViT at batch 32 has M = 32 x 197), never their own batch count as well
                      batch_count=None if model else batch,
                      status=status, cache=cache, sort=sort, descending=desc, limit=limit)
    if best:
        keys = query.config_keys(database, f)
        if sort not in query.SORTABLE:
            raise UsageError(f"cannot sort by {sort!r} (choose from {', '.join(query.SORTABLE)})")
        # no --dtype: every data type, the best per config in each (it used to be fp32 only, silently)
        found = [r for p in ([dtype] if dtype else L.PRECISIONS)
                 for r in query.best_per_config(database, system, p, cache or "warm", keys).values()
                 if dtype or r.precision == p]  # a precision's fallback rows (fp8 -> fp16) once
        recs = query.sort_records(found, sort, desc, limit)
        title = f"{len(recs)} best measurements per config in {dtype or 'each data type'}"
    else:
        recs = query.measurements(database, f)
        title = f"{len(recs)} measurements"
    _emit([r.to_dict() for r in recs], fmt, title,
          [Col("system_id", "num", drop=7), Col("kind", "name", drop=6), Col("description"),
           Col("precision", "name", drop=5), Col("call", "name", drop=4), Col("algorithm", "token"), Col("math", "name", drop=3),
           Col("cache", "name", drop=2), Col("status", "name", drop=8), Col("median_ms", "num"),
           Col("iqr_ms", "num", drop=9), Col("samples", "num", drop=10), Col("converged", "name", drop=1)])


@db_app.command("shared")
@guarded
def db_shared(model: str = typer.Argument(..., help="ONNX file or model name in the database"),
              batch: Optional[int] = typer.Option(None, "--batch", help="the model's batch size (default: any)"),
              db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
              system: Optional[str] = typer.Option(None, "--system", help="id, fingerprint prefix or GPU name "
                                                   "(default: any system)"),
              dtype: str = typer.Option("fp32", "--dtype", help="data type: fp32, tf32, fp16, bf16, fp8"),
              json_out: bool = typer.Option(False, "--json", help="the counts as JSON on stdout")):
    """How many of MODEL's unique layer configs are already measured (what a run still has to do).

    Example: benanza db shared resnet50.onnx --batch 32 --dtype fp16 --db perf.db"""
    from benanza.database import query
    from benanza.database.store import open_db

    database = open_db(db, create=False)
    _db_notices(database)
    r = query.shared_configs(database, model, batch, system, dtype)
    if json_out:
        _print_json(r)
        return
    out.print(f"{model} (batch {batch or 'any'}, {dtype}): {r['measured']} of {r['unique_configs']} unique layer "
              f"configs already measured ({r['shared_fraction']:.0%}); {r['to_measure']} to measure", markup=False)


@db_app.command("compare")
@guarded
def db_compare(system_a: str = typer.Argument(..., help="system A (id, fingerprint prefix, GPU name)"),
               system_b: str = typer.Argument(..., help="system B"),
               db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
               dtype: str = typer.Option("fp32", "--dtype", help="the data type compared (fp32, tf32, fp16, bf16, fp8)"),
               cache: str = typer.Option("warm", "--cache", help="warm or cold measurements"),
               fmt: str = typer.Option("table", "--format", help=FORMAT_HELP)):
    """Per layer config measured on both systems: the best times and their ratio (B / A). Exits 2 when
    the two systems have nothing in common in that data type.

    Example: benanza db compare H100 H200 --dtype fp16 --db db/reference/h100_h200_fp16.sqlite.gz"""
    import numpy as np

    from benanza.database import query
    from benanza.database.store import open_db

    database = open_db(db, create=False)
    _db_notices(database)
    Precision.of(dtype)
    rows = query.compare_systems(database, system_a, system_b, dtype, cache)
    if not rows:
        raise UsageError(f"systems {system_a} and {system_b} have no layer config measured in {dtype} ({cache}) "
                         f"on both: nothing to compare (try another --dtype)")
    a, b = _short_gpu(rows[0]["a_system"]), _short_gpu(rows[0]["b_system"])
    if a == b:  # two systems of one GPU model (other drivers, libraries): named by their ids
        a, b = f"{a} ({system_a})", f"{b} ({system_b})"
    title = (f"{len(rows)} layer configs measured on both {a} and {b} in {dtype} ({cache}); median ratio "
             f"{b}/{a} {np.median([r['ratio'] for r in rows]):.3f}")
    if fmt.lower() != "table":  # CSV and JSON keep the stable keys (a_ms, b_ms, a_system, ...)
        _emit(rows, fmt, title)
        return
    shown = [{"kind": r["kind"], "description": r["description"], f"{a}_ms": r["a_ms"], f"{b}_ms": r["b_ms"],
              f"{b}/{a}": f"{r['ratio']:.3f}", f"{a} algorithm": r["a_algorithm"], f"{b} algorithm": r["b_algorithm"]}
             for r in rows]
    _emit(shown, fmt, title, [Col("kind", "name", drop=3), Col("description"), Col(f"{a}_ms", "num"),
                              Col(f"{b}_ms", "num"), Col(f"{b}/{a}", "num"), Col(f"{a} algorithm", drop=1),
                              Col(f"{b} algorithm", drop=1)])


def _short_gpu(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``: the GPU's name without the vendor and the memory or
    form-factor words (``80GB``, ``HBM3``, ``PCIe``, ``SXM5``, ``NVL``)."""
    import re

    words = [w for w in name.split() if w != "NVIDIA" and not re.fullmatch(r"\d+GB|HBM\d*e?|PCIe|SXM\d*|NVL", w)]
    return " ".join(words) or name


@db_app.command("export")
@guarded
def db_export(output: Path = typer.Option(..., "-o", "--output", help="new SQLite file"),
              db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
              system: Optional[str] = typer.Option(None, "--system", help="only this system"),
              model: Optional[list[str]] = typer.Option(None, "--model", help="only these models' configs"),
              batch: Optional[int] = typer.Option(None, "--batch", help="with --model: the model's batch size"),
              fmt: str = typer.Option("sqlite", "--format", help="sqlite (a benanza database for `db import`), "
                                      "gbench (Google Benchmark's JSON, for its tools/compare.py; one system) or "
                                      "nvbench (NVBench's JSON, for its nvbench_compare.py; one system)")):
    """Write chosen systems and models to a portable SQLite file (merge it elsewhere with `db import`),
    or one system's measurements as Google Benchmark or NVBench JSON.

    Example: benanza db export --system H200 --format gbench -o h200.json (then
    compare.py benchmarks h100.json h200.json)"""
    from benanza.database import sharing
    from benanza.database.store import open_db

    if fmt not in ("sqlite", "gbench", "nvbench"):
        raise UsageError(f"--format must be sqlite, gbench or nvbench, not {fmt!r}")
    if output.exists():
        raise UsageError(f"-o {output}: exists; export writes a new file")
    _check_output_file("-o", output)
    database = open_db(db, create=False)
    _db_notices(database)
    if fmt in ("gbench", "nvbench"):
        from benanza.database.exports import gbench_doc, nvbench_doc, write_json
        from benanza.database.query import model_keys

        keys = sorted({k for m in model for k in model_keys(database, m, batch)}) if model else None
        doc = (gbench_doc if fmt == "gbench" else nvbench_doc)(database, system, keys)
        write_json(doc, output)
        what = (f"{len(doc['benchmarks'])} measurements of {doc['context']['host_name']} as Google Benchmark JSON"
                if fmt == "gbench" else f"{len(doc['benchmarks'])} benchmarks of {doc['devices'][0]['name']} as "
                f"NVBench JSON")
        out.print(f"exported {what} to {output}", markup=False)
        return
    st = sharing.export(database, output, system, model, batch)
    out.print(f"exported {st.jobs_added} jobs, {st.measurements_written + st.orphans_written} measurements, "
              f"{st.systems_added} systems, {st.configs_added} layer configs to {output}", markup=False)
    for n in st.notes:
        err.print(f"benanza: note: {n}", markup=False)


@db_app.command("import")
@guarded
def db_import(source: str = typer.Argument(..., help="a benanza database file or URL"),
              db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
              json_out: bool = typer.Option(False, "--json", help="the import counts as JSON on stdout")):
    """Merge SOURCE into the database: per job (config x precision x system) the newer one wins; a job
    without a valid time never replaces one that has one.

    Example: benanza db import colleague.db --db perf.db"""
    from benanza.database import sharing
    from benanza.database.store import open_db
    from benanza.reports.progress import spinner

    database = open_db(db)
    _db_notices(database)
    with spinner(err, f"importing {source} into {database.safe_url}", enabled=not json_out):
        st = sharing.import_db(database, source)
    if json_out:
        _print_json(st.to_dict())
        return
    out.print(f"imported from {source}: {st.jobs_added} jobs added, {st.jobs_replaced} replaced by newer, "
              f"{st.jobs_kept} kept (not newer); {st.measurements_written + st.orphans_written} measurements, "
              f"{st.systems_added} systems, {st.configs_added} layer configs, {st.models_added} models, "
              f"{st.ceilings_written} ceilings, {st.counters_written} kernel counters added; "
              f"{st.rows_per_s:.0f} rows/s", markup=False)


@db_app.command("upgrade")
@guarded
def db_upgrade(db: Optional[str] = typer.Option(None, "--db", help=DB_HELP)):
    """Bring a database written by an older benanza to the current schema (migrations).

    Example: benanza db upgrade --db perf.db"""
    from benanza.database.store import SCHEMA_VERSION, open_db

    database = open_db(db, create=False)
    for n in database.notices:
        out.print(n, markup=False, soft_wrap=True)
    if not database.notices:
        out.print(f"{database.safe_url}: schema {SCHEMA_VERSION} is current", markup=False)


@app.callback(invoke_without_command=True)
def _root(version: bool = typer.Option(False, "--version", help="print the version")):
    if version:
        out.print(f"benanza {__version__}")
        raise typer.Exit(0)


def main(argv: list[str] | None = None) -> None:
    """The console entry point. Usage errors (a missing argument, an unknown option, a bad value)
    are one line ``benanza: ...`` and exit 2, not the boxed message of typer's click."""
    try:
        rc = app(args=argv, prog_name="benanza", standalone_mode=False)
    except Exception as e:  # noqa: BLE001 - click's exceptions (typer vendors its own click)
        kinds = {c.__name__ for c in type(e).__mro__}
        if "UsageError" in kinds and hasattr(e, "format_message"):
            ctx = getattr(e, "ctx", None)
            path = ctx.command_path if ctx is not None else "benanza"
            err.print(f"benanza: {path}: {' '.join(e.format_message().split())} (see `{path} --help`)",
                      markup=False, highlight=False, soft_wrap=True)
            sys.exit(2)
        if "Abort" in kinds:
            err.print("benanza: interrupted", markup=False, highlight=False)
            sys.exit(130)
        if "ClickException" in kinds and hasattr(e, "format_message"):
            err.print(f"benanza: {' '.join(e.format_message().split())}", markup=False, highlight=False)
            sys.exit(getattr(e, "exit_code", 1))
        raise
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()


# ----------------------------------------------------------------------------------------- profile

def _profile_tables(p) -> list:
    """The summary of a :class:`benanza.profiles.Profile` as rich renderables."""
    from collections import Counter

    s = p.settings
    head = FitTable(f"{p.model} batch {p.batch} {p.dtype or ''}: PyTorch {s.framework_version or '?'}, "
                    f"{s.gpu_name or s.device or '?'}, cuDNN {version_text('cudnn', s.cudnn_version)}, "
                    f"cudnn.benchmark {s.cudnn_benchmark}, TF32 matmul/cuDNN "
                    f"{s.allow_tf32_matmul}/{s.allow_tf32_cudnn}", [Col("measure"), Col("ms", "num"), Col("note")])
    lat = p.latency
    if lat is not None:
        head.add_row("latency (median)", f"{lat.median_ms:.4f}",
                     f"IQR {lat.iqr_ms:.4f} ms, {lat.samples} samples, {lat.method}"
                     + (" (noisy: IQR > 10 % of the median)" if lat.noisy else ""))
    head.add_row("GPU kernel time", f"{p.gpu_kernel_ms:.4f}", f"union of kernel intervals, median of {p.iterations} iterations")
    if p.host_overhead_ms is not None:
        head.add_row("host overhead", f"{p.host_overhead_ms:.4f}", "latency - GPU kernel time: the GPU waits")
    cat_ms, cat_n = p.category_ms(), p.category_counts()
    for c, ms in cat_ms.items():
        if cat_n[c]:
            head.add_row(f"kernels: {c}", f"{ms:.4f}", f"{cat_n[c]} kernels per iteration")
    gaps = p.launch_gaps() if p.trace is not None else []
    if gaps:
        n = max(p.iterations, 1)
        hb = [g for g in gaps if g.host_bound]
        head.add_row("launch gaps", f"{sum(g.gap_ms for g in gaps) / n:.4f}",
                     f"{len(gaps) // n} gaps per iteration, {sum(g.gap_ms for g in hb) / n:.4f} ms host-bound "
                     f"(under the profiler)")
    unf = p.unfused()
    if unf:
        head.add_row("unfused layers", f"{sum(u.ms for u in unf):.4f}",
                     ", ".join(f"{k} x{v}" for k, v in sorted(Counter(u.kind for u in unf).items())))
    joined = sum(1 for lp in p.layers if lp.op is not None)
    head.add_row("layers joined", "", f"{joined} of {len(p.layers)} layers matched a framework op; "
                                      f"{len(p.conv_engines)} conv engines, {len(p.gemm_algos)} GEMM algorithms "
                                      f"from the logs")
    if p.unmatched_ops:
        head.add_row("framework ops without a layer", "",
                     ", ".join(f"{k} x{v:g}" for k, v in p.unmatched_ops.items()))
    return [head]


@app.command()
@guarded
def profile(model: Path = typer.Argument(..., help="ONNX model file"),
            batch: Optional[int] = typer.Option(None, "--batch", "-b", help="batch size (default 1; with --from: the profile's)"),
            dtype: str = typer.Option("fp32", "--dtype", "-t", help="fp32 (TF32 off), tf32, fp16 or bf16"),
            output: Optional[Path] = typer.Option(None, "-o", "--output", help="profile folder to write (default ./profile-MODEL-bN-DTYPE)"),
            load: Optional[Path] = typer.Option(None, "--from", help="read this profile folder instead of running the model (e.g. from your own PyTorch program)"),
            device: str = typer.Option("cuda", "--device", help="cuda, cuda:N or cpu"),
            warmup: int = typer.Option(20, "--warmup", help="warm-up inferences before timing (at most 3 s once 5 are done)"),
            runs: int = typer.Option(100, "--runs", help="timed inferences (latency median and IQR; at most 5 s once 10 are done)"),
            iterations: int = typer.Option(5, "--iterations", help="inferences recorded by torch.profiler"),
            cudnn_benchmark: bool = typer.Option(True, "--cudnn-benchmark/--no-cudnn-benchmark", help="torch.backends.cudnn.benchmark (engine autotuning)"),
            channels_last: bool = typer.Option(False, "--channels-last", help="run the model and its 4-D inputs in torch.channels_last (NHWC) memory format"),
            logs: bool = typer.Option(True, "--logs/--no-logs", help="also run with cuDNN and cuBLASLt logging (engines, algorithms)"),
            force: bool = typer.Option(False, "--force", help="replace a profile already in the output folder"),
            timeout: float = typer.Option(1800.0, "--timeout", help="seconds per PyTorch run"),
            json_out: bool = typer.Option(False, "--json", help="JSON on stdout (the joined profile)"),
            dim: Optional[list[str]] = typer.Option(None, "--dim", help=DIM_HELP),
            batch_dim: Optional[int] = typer.Option(None, "--batch-dim", help=BATCH_DIM_HELP)):
    """Run MODEL in PyTorch under torch.profiler (and cuDNN/cuBLASLt logging) into a profile folder,
    join its kernels with the model's layers and print what the framework did.

    Example: benanza profile resnet50.onnx --batch 32 --dtype fp16 -o prof-r50"""
    from benanza.profiles import capture_profile, load_profile
    from benanza.reports.progress import Steps

    dims = _parse_dims(dim)
    if load is None:
        b = 1 if batch is None else batch
        folder = output or Path(f"profile-{model.stem}-b{b}-{dtype}")
        with Steps(err, quiet=json_out) as say:  # each step's line, and a spinner on a terminal
            capture_profile(model, b, dtype, folder, device=device, warmup=warmup, runs=runs, iterations=iterations,
                            cudnn_benchmark=cudnn_benchmark, logs=logs, dims=dims, batch_dim=batch_dim, force=force,
                            timeout=timeout, say=say, channels_last=channels_last)
        if not json_out:
            err.print(f"profile written to {folder}", markup=False, highlight=False)
    else:
        if output is not None:
            raise UsageError("--from reads a profile and -o writes one: give one of them")
        folder = load
    p = load_profile(folder, model, batch, dims, batch_dim)
    if json_out:
        _print_json(p.to_dict(), default=str)
        return
    for n in p.notices:
        err.print(f"notice: {n}", markup=False, soft_wrap=True)
    for t in _profile_tables(p):
        out.print(t)


def _input_shape(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """``--input-shape 3x299x299`` -> (3, 299, 299); None when not given; :class:`UsageError` else."""
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--input-shape {text!r}: give dims like 3x224x224") from None


TORCH_SPEC_HELP = ("a torchvision model name (resnet50, vit_b_16), transformers:TYPE (transformers:bert) or "
                   "package.module:factory (a function returning the nn.Module)")


@app.command("torch")
@guarded
def torch_cmd(spec: str = typer.Argument(..., help=TORCH_SPEC_HELP),
              batch: str = typer.Option("1", "--batch", "-b", help="batch sizes, e.g. 1,32"),
              dtype: str = typer.Option("fp32", "--dtype", "-t", help="fp32 (PyTorch's default: TF32 convolutions, "
                                        "FP32 matmuls), tf32, fp16 or bf16"),
              db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
              output: Optional[Path] = typer.Option(None, "-o", "--output", help="working folder: the export, "
                                                    "profiles and reports (default ./benanza-torch-NAME)"),
              device: str = typer.Option("cuda", "--device", help="cuda or cuda:N"),
              channels_last: bool = typer.Option(False, "--channels-last", help="also profile the module in "
                                                 "torch.channels_last memory format"),
              compile_mode: Optional[str] = typer.Option(None, "--compile", help="also profile torch.compile(module, "
                                                         "mode=MODE): default, reduce-overhead or max-autotune"),
              bench: bool = typer.Option(True, "--bench/--no-bench", help="bench the layers first (--no-bench: "
                                         "the database has them)"),
              bench_args: str = typer.Option("", "--bench-args", help="more `benanza bench` options, one string, "
                                             "e.g. '--max-engines 4 --no-cold'"),
              seq: int = typer.Option(128, "--seq", help="sequence length of transformers inputs (prefill)"),
              phase: str = typer.Option("prefill", "--phase", help="a transformers decoder's phase: prefill (the "
                                        "prompt's forward pass, --seq tokens: time to first token) or decode (one "
                                        "new token per sequence against a KV cache of --kv-len tokens: time per "
                                        "output token)"),
              kv_len: Optional[int] = typer.Option(None, "--kv-len", help="with --phase decode: tokens in the KV "
                                                   "cache (default --seq)"),
              input_shape: Optional[str] = typer.Option(None, "--input-shape", help="per-sample input shape of an "
                                                        "image model, e.g. 3x299x299"),
              warmup: int = typer.Option(20, "--warmup", help="warm-up inferences before timing (at most 3 s once 5 are done)"),
              runs: int = typer.Option(100, "--runs", help="timed inferences (latency median and IQR; at most 5 s once 10 are done)"),
              iterations: int = typer.Option(5, "--iterations", help="inferences recorded by torch.profiler"),
              logs: bool = typer.Option(True, "--logs/--no-logs", help="also profile each eager run with cuDNN and "
                                        "cuBLASLt logging, a run of its own (the engines and algorithms the framework "
                                        "chose; --no-logs: a third less profiling, the reports without them)"),
              force: bool = typer.Option(False, "--force", help="export again over an existing export"),
              json_out: bool = typer.Option(False, "--json", help="the insights documents as a JSON list on stdout"),
              train: bool = typer.Option(False, "--train", help=TORCH_TRAIN_HELP),
              optimizer: str = typer.Option("sgd", "--optimizer", help=OPTIMIZER_HELP)):
    """Analyze a PyTorch module as users run it: export it to ONNX, bench its layers, profile the
    module itself (eager; channels_last and torch.compile when asked), join its kernels to the
    layers and report how fast it could run and what stands in the way (--train: of a training step).

    Example: benanza torch resnet50 --batch 1,32 --dtype fp16"""
    from benanza import api
    from benanza.processing.model import parse_batches
    from benanza.processing.modules import resolve
    from benanza.profiles.pytorch import check_dtype, prepare
    from benanza.reports.progress import Steps

    check_dtype(dtype)
    batches = parse_batches(batch)
    if compile_mode is not None and compile_mode not in ("default", "reduce-overhead", "max-autotune"):
        raise UsageError(f"--compile {compile_mode!r}: choose default, reduce-overhead or max-autotune")
    shape = _input_shape(input_shape)
    if kv_len is not None and phase != "decode":
        raise UsageError("--kv-len: only with --phase decode")
    if train:
        if phase != "prefill":
            raise UsageError("--train: a training step has no decode phase (leave --phase out)")
        return _torch_train_cmd(spec, batches, dtype, optimizer, db, output, device, bench, bench_args, seq, shape,
                                warmup, runs, iterations, force, channels_last, compile_mode, json_out, logs)
    src = resolve(spec, seq, shape, phase, kv_len)
    folder = output or Path(f"benanza-torch-{src.name}")
    ref = {"spec": spec, "seq": seq, "input_shape": list(shape) if shape else None, "phase": phase,
           "kv_len": kv_len}
    docs: list = []
    steps: dict = {}
    opened: dict = {}  # the database and this GPU's fingerprint, at the first report

    def report(onnx_path, r):  # each run's report as soon as its profile is taken (a cut command keeps them)
        if not opened:
            opened.update(db=api.open_database(db), fingerprint=api.current_fingerprint())
        docs.append(_torch_report(spec, dtype, opened["db"], folder, onnx_path, r, phase, opened["fingerprint"],
                                  steps))

    with Steps(err, quiet=json_out) as say:  # each step's line, and a spinner on a terminal
        how = api.torch_bench(dtype, db, bench_args, quiet=True, say=say) if bench else False  # in this process
        prepare(src, folder, batches, dtype, db, device, channels_last, compile_mode, how, bench_args, warmup, runs,
                iterations, ref, force, say, seconds=steps, logs=logs, on_run=report)
    _print_torch_reports(spec, dtype, folder, docs, json_out)


def _profile_seconds(folder: Path) -> dict:
    """The ``seconds`` profile.json records (log run, timed run, the module's build; empty when absent)."""
    try:
        return dict(json.loads((folder / "profile.json").read_text()).get("seconds") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def _torch_report(spec: str, dtype: str, db, folder: Path, onnx_path, r, phase: str, fingerprint: str | None,
                  steps: dict | None = None) -> dict:
    """``torch``: one profiled run ``r``'s analysis and insights document (with the decoder's physical
    bound where ``phase`` is decode, or the export is found causal), written as ``report-*.json`` and
    ``.html`` beside its profile folder; returns the document. ``db``: a database, URL or path
    (:func:`benanza.api.open_database`); ``fingerprint``: this GPU's (the database's system the analysis
    reads). ``steps``: the command's export and
    bench seconds (:func:`benanza.profiles.pytorch.prepare`), in the document's ``run.command_seconds``
    beside the run's own ``run.seconds``."""
    from benanza import api
    from benanza.profiles import load_profile
    from benanza.profiles.pytorch import DTYPES
    from benanza.reports.report import render_html

    database = api.open_database(db)
    _, _, precision, conv = DTYPES[dtype]
    layouts = api.DEFAULT_LAYOUTS
    prof = load_profile(r.folder, onnx_path, r.batch)
    lb = api.lower_bound(api.Scenario(onnx_path, r.batch, precision, layouts, conv_precision=conv), database,
                         fingerprint=fingerprint)
    a, ml, system = lb.analysis, lb.layers, lb.system
    d = _insight_docs(prof, [a], ml, database, system, "warm", layouts,
                      phase="decode" if phase == "decode" else None)[0]  # prefill: if causal (a decoder)
    d["run"] = {"spec": spec, "label": r.label, "folder": str(r.folder), "export": str(onnx_path),
                "seconds": _profile_seconds(r.folder), "command_seconds": dict(steps or {})}
    stem = r.folder.name.replace("profile-", "report-")
    (folder / f"{stem}.json").write_text(json.dumps(d, indent=1, default=str))
    svg, source = _roofline_svg(a, system, database)
    (folder / f"{stem}.html").write_text(render_html(d, svg, source), encoding="utf-8")
    return d


def _print_torch_reports(spec: str, dtype: str, folder: Path, docs: list[dict], json_out: bool) -> None:
    """``torch``: the reports' terminal tables, each run's after the path of its HTML report (or the
    documents as a JSON list)."""
    from benanza.reports.report import terminal_tables

    if json_out:
        _print_json(docs, default=str)
        return
    for d in docs:
        stem = Path(d["run"]["folder"]).name.replace("profile-", "report-")
        out.print(f"{spec} batch {d['batch']} {dtype}, {d['run']['label']}: report in {folder / (stem + '.html')}",
                  markup=False)
        for n in d["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for t in terminal_tables(d):
            out.print(t)
