"""``layers``, ``generate``, ``build``, ``run``, ``bench``, ``worker``, ``ceilings`` and ``system``: the model
and the GPU side, each a request handed to a use case and its result to :mod:`benanza.reports.suite`."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benanza.cli.app import guarded, progress
from benanza.lazy import LazyModule
from benanza.cli.options import (TRAIN_HELP, Batches, ClusterOptions, ConvTf32, BatchDim, Db, Device, Dim, Layout,
                                 Model, Optimizer, Quiet, SuiteDtypes, Torch, cluster_options, timing_options)
from benanza.reports.terminal import line
from benanza.spec import (TIMING, BenchRequest, RunRequest, Timing, optimizer as spec_optimizer, parse_dims,
                          parse_layouts, parse_precisions)

report = LazyModule("benanza.reports.suite")
uc = LazyModule("benanza.usecases.bench")
models = LazyModule("benanza.usecases.model")


def _batches(text: str) -> list[int]:
    from benanza.processing.model import parse_batches

    return parse_batches(text)


@guarded
def layers(model: Model, batch: Batches = "1",
           json_out: Annotated[bool, typer.Option("--json", help="JSON on stdout")] = False,
           details: Annotated[bool, typer.Option("--details", help="list every layer")] = False,
           dim: Dim = None, batch_dim: BatchDim = None):
    """Parse MODEL into layers: counts and unique layers by type, unsupported ops, fusion candidates.

    Example: benanza layers resnet50.onnx --batch 32"""
    mls = models.layers(model, _batches(batch), parse_dims(dim), batch_dim, progress(quiet=json_out))
    report.print_layers(mls, json_out, details)


Output = Annotated[Path, typer.Option("-o", "--output", help="folder for the suite")]
Kinds = Annotated[Optional[str], typer.Option("--kinds", help="only these layer kinds, e.g. Activation,Elementwise "
                                              "(bench with --force: measure again what a harness change touched)")]


@guarded
def generate(model: Model, batch: Batches = "1", dtype: SuiteDtypes = "fp32", output: Output = ...,
             layout: Layout = "nchw,nhwc", kinds: Kinds = None, conv_tf32: ConvTf32 = False, dim: Dim = None,
             batch_dim: BatchDim = None,
             train: Annotated[bool, typer.Option("--train", help="the backward calls of a training step too")] = False,
             optimizer: Optimizer = None):
    """Generate the C++ benchmark suite (and its CMake project) for MODEL's unique layers.

    Example: benanza generate resnet50.onnx --batch 1,32 --dtype fp16 -o suite"""
    opt = spec_optimizer(optimizer, train)
    suite, note = models.generate(model, _batches(batch), dtype, output, layout, kinds, conv_tf32, parse_dims(dim),
                                  batch_dim, train, opt, progress())
    report.print_generate(suite, output, note)


@guarded
def build(folder: Annotated[Path, typer.Argument(help="suite folder written by `benanza generate`")],
          jobs: Annotated[Optional[int], typer.Option("-j", "--jobs", help="parallel compile jobs")] = None,
          quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar on stderr")] = False):
    """Compile a generated suite with CMake against cuDNN and cuBLAS.

    Example: benanza build suite"""
    r = uc.build_with_progress(folder, jobs, quiet, progress(quiet))
    line(f"built {r.executable} (configure {r.configure_s:.1f} s, compile {r.compile_s:.1f} s)")


@guarded
@timing_options
@cluster_options
def run(folder: Annotated[Path, typer.Argument(help="built suite folder")], db: Db = None,
        timing: Timing = TIMING, torch: Torch = None, cluster: ClusterOptions = ClusterOptions(), quiet: Quiet = False,
        json_out: Annotated[bool, typer.Option("--json", help="the run summary as JSON on stdout (no progress)")] = False):
    """Run a built suite on the GPU and store the measurements in the database.

    Example: benanza run suite --db perf.db"""
    kinds = uc.cluster_kinds(cluster.cluster, cluster.gpu_kinds)  # before any work
    req = RunRequest(folder, timing, db, torch, cluster.cluster, tuple(kinds) if kinds else None, quiet or json_out)
    report.print_run(uc.run(req, progress(quiet or json_out)), json_out)


ModelsArg = Annotated[Optional[list[Path]], typer.Argument(help="ONNX model file(s): several make a zoo, one suite of "
                                                           "their unique jobs")]
ModelsFile = Annotated[Optional[Path], typer.Option("--models-file", help="models to bench, one path per line "
                                                    "(relative to the file; # starts a comment line)")]
SuiteFolder = Annotated[Optional[Path], typer.Option("-o", "--output", help="suite folder (default: a cache folder)")]
Counters = Annotated[bool, typer.Option("--counters", help="then profile each layer's best implementation once with "
                                        "Nsight Compute (ncu on PATH) and store its DRAM and SM throughput, achieved "
                                        "occupancy, launch shape and kernel names (with --train, each measured call of "
                                        "the step too)")]
BenchJson = Annotated[bool, typer.Option("--json", help="stages, run and analyses as JSON on stdout (no progress)")]


def bench_request(model, models_file, batch, dtype, db, output, layout, kinds, timing, torch, conv_tf32, dim,
                  batch_dim, train, optimizer, cluster: ClusterOptions, counters: bool, quiet: bool) -> BenchRequest:
    """``bench``'s options as a request, every one checked before any work."""
    from benanza.generation.generator import parse_kinds

    paths = uc.model_list(model, models_file)
    gkinds = uc.cluster_kinds(cluster.cluster, cluster.gpu_kinds)
    if counters and cluster.cluster is not None:
        from benanza.errors import UsageError

        raise UsageError("--counters with --cluster: Nsight Compute profiles on this machine's GPU")
    opt = spec_optimizer(optimizer, train)
    uc.run_options(timing)  # every timing option checked
    lk = parse_kinds(kinds)
    return BenchRequest(tuple(paths), tuple(_batches(batch)), tuple(parse_precisions(dtype)),
                        tuple(parse_layouts(layout)), timing, db, output, tuple(lk) if lk else None, torch, conv_tf32,
                        tuple(parse_dims(dim).items()), batch_dim, train, opt, cluster.cluster,
                        tuple(gkinds) if gkinds else None, quiet)


@guarded
@timing_options
@cluster_options
def bench(model: ModelsArg = None, models_file: ModelsFile = None, batch: Batches = "1", dtype: SuiteDtypes = "fp32",
          db: Db = None, output: SuiteFolder = None, layout: Layout = "nchw,nhwc", kinds: Kinds = None,
          timing: Timing = TIMING, layers_table: Annotated[bool, typer.Option("--layers/--no-layers", help="print the "
                                                                              "per-layer tables")] = True,
          quiet: Quiet = False, json_out: BenchJson = False, conv_tf32: ConvTf32 = False, torch: Torch = None,
          dim: Dim = None, batch_dim: BatchDim = None, counters: Counters = False,
          train: Annotated[bool, typer.Option("--train", help=TRAIN_HELP)] = False, optimizer: Optimizer = None,
          cluster: ClusterOptions = ClusterOptions()):
    """All of it: process, generate, compile, run on the GPU, store, and print the LBL. Several
    models (a zoo): one suite of their unique jobs, each measured once, then each model's LBL.

    Example: benanza bench resnet50.onnx --batch 1,32 --dtype fp16 --db perf.db"""
    ncu = uc.find_ncu() if counters else None  # before any work
    req = bench_request(model, models_file, batch, dtype, db, output, layout, kinds, timing, torch, conv_tf32, dim,
                        batch_dim, train, optimizer, cluster, counters, quiet or json_out)
    p = progress(quiet or json_out)
    r = uc.bench(req, p)
    if ncu:
        uc.counters(r, ncu, timing, timing.force, p)
    report.print_bench(r, json_out, layers_table, bool(cluster.cluster))


@guarded
def worker(scheduler: Annotated[str, typer.Option("--scheduler", help="the Dask scheduler's address, tcp://HOST:PORT")],
           devices: Annotated[Optional[str], typer.Option("--devices", help="the GPUs to serve: 'all' (default) or "
                                                          "0,1,...")] = None,
           workers_per_gpu: Annotated[int, typer.Option("--workers-per-gpu", help="suite processes per GPU, taking "
                                                        "turns on it (one builds engine plans while another times "
                                                        "calls)")] = TIMING.workers_per_gpu):
    """Serve this host's GPUs to a Dask cluster (pip install benanza[cluster]): one worker per GPU,
    pinned to it and declaring its GPU kind, until Ctrl-C. Jobs come from `bench`/`run --cluster`.

    Example: benanza worker --scheduler tcp://10.0.0.1:8786"""
    uc.serve_workers(scheduler, devices, workers_per_gpu, progress())


@guarded
def ceilings(db: Db = None, device: Device = 0, output: SuiteFolder = None,
             json_out: Annotated[bool, typer.Option("--json", help="the ceilings as JSON on stdout")] = False):
    """Measure this GPU's ceilings (DRAM bandwidth, GEMM rate per data type, FP32 FMA rate) and
    store them with the system: the roofs of the roofline.

    Example: benanza ceilings --db perf.db"""
    report.print_ceilings(uc.ceilings(db, device, output, json_out, progress(json_out)), json_out)


@guarded
def system(json_out: Annotated[bool, typer.Option("--json", help="devices and libraries as JSON on stdout")] = False):
    """Describe the CUDA devices here and the cuDNN/cuBLAS benanza would use (a notice on stderr
    when they are older than the ones benanza is built with).

    Example: benanza system --json"""
    from benanza.runner import system as sysq
    from benanza.versions import older_libraries

    info = sysq.describe()
    report.print_system(info, json_out)
    notice = older_libraries(info)
    if notice:
        progress().notice(notice)
