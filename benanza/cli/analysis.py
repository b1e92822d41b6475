"""``analyze``, ``roofline``, ``predict`` and ``report``: the LBL from the performance database, each a
request (:mod:`benanza.spec`) handed to a use case (:mod:`benanza.usecases`) and its result to
:mod:`benanza.reports`. The three take the same scenario options (:class:`~benanza.cli.options.ScenarioOptions`)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benanza.cli.app import check_output_file, guarded, progress
from benanza.lazy import LazyModule
from benanza.cli.options import (Batches, Db, Dtypes, Model, OneBatch, OneDtype, Optimizer, ScenarioOptions, System,
                                 scenario_options)
from benanza.spec import (AnalyzeRequest, PredictRequest, RooflineRequest, Scenario, cache, conv_precision,
                          layouts, optimizer as spec_optimizer, parse_dims, parse_precisions)

lbl = LazyModule("benanza.reports.lbl")
analyze_uc = LazyModule("benanza.usecases.analyze")
predict_uc = LazyModule("benanza.usecases.predict")

ProfileDir = Annotated[Optional[Path], typer.Option("--profile", help="framework profile folder (`benanza profile`): "
                                                    "compare the framework with the LBL")]
Html = Annotated[Optional[Path], typer.Option("--html", help="with --profile: write a self-contained HTML report to "
                                              "this file")]
AllowMismatch = Annotated[bool, typer.Option("--allow-mismatch", help="with --profile: compare a profile taken of "
                                             "another model file (its recorded hash differs)")]
Trace = Annotated[Optional[Path], typer.Option("--trace", help="write the parallel LBL's schedule (critical path on "
                                               "stream 0, one slice per layer with its call and algorithm) as a "
                                               "Chrome/Perfetto trace JSON to this file")]
AnalyzeTrain = Annotated[bool, typer.Option("--train", help="the training step's LBL too (forward + backward, from "
                                            "`benanza bench --train`'s measurements)")]
AnalyzeJson = Annotated[bool, typer.Option("--json", help="the analyses (with --profile: the insights) as JSON on stdout")]
LayersTable = Annotated[bool, typer.Option("--layers/--no-layers", help="print the per-layer table")]


def scenarios(model: Path, batches: list[int], dtype: str, system: str | None, sc: ScenarioOptions) -> tuple:
    """One :class:`benanza.spec.Scenario` per batch and data type (in that order), every option parsed
    by :mod:`benanza.spec` (UsageError for a bad one)."""
    precisions = parse_precisions(dtype)
    lays, _ = layouts(sc.layout), cache(sc.cache)
    conv = conv_precision(sc.conv_tf32, precisions)
    dims = tuple(parse_dims(sc.dim).items())
    return tuple(Scenario(model, b, p, lays, sc.cache, system, conv, dims, sc.batch_dim) for b in batches for p in precisions)


def analyze_request(model, batch: str, dtype, db, system, sc, profile_dir, html, allow_mismatch, trace, train,
                    optimizer) -> AnalyzeRequest:
    """``analyze``'s options as a request: with ``--profile`` the profile's batch (``--batch``, if
    given, must be it); the output files checked before any work."""
    from benanza.processing.model import parse_batches

    opt = spec_optimizer(optimizer, train)
    check_output_file("--trace", trace)
    batches = parse_batches(batch)
    if profile_dir is not None:
        batches = [analyze_uc.profile_batch(profile_dir, batches, batch != "1")]
    return AnalyzeRequest(scenarios(model, batches, dtype, system, sc), db, train, opt, profile_dir, allow_mismatch,
                          trace, html)


@guarded
@scenario_options
def analyze(model: Model, batch: Batches = "1", dtype: Dtypes = "fp32", db: Db = None, system: System = None,
            scenario: ScenarioOptions = ScenarioOptions(), json_out: AnalyzeJson = False,
            layers_table: LayersTable = True, profile_dir: ProfileDir = None, html_out: Html = None,
            allow_mismatch: AllowMismatch = False, trace_out: Trace = None, train: AnalyzeTrain = False,
            optimizer: Optimizer = None):
    """Lower-bound latency (sequential and parallel) of MODEL from the performance database; with
    --profile DIR, what stands between the framework's measured latency and the LBL (Benanza ratio,
    algorithm selection, framework inefficiencies, fusion, Tensor Cores, joint speedup).

    Example: benanza analyze resnet50.onnx --batch 32 --dtype fp16 --trace lbl.json (open lbl.json in
    ui.perfetto.dev beside the torch.profiler trace)"""
    req = analyze_request(model, batch, dtype, db, system, scenario, profile_dir, html_out, allow_mismatch,
                          trace_out, train, optimizer)
    lbl.print_analyze(analyze_uc.analyze(req, progress(quiet=json_out)), json_out, layers_table)


Ceilings = Annotated[str, typer.Option("--ceilings", help="spec (datasheet figures) or measured")]
Png = Annotated[Optional[Path], typer.Option("--png", help="write the roofline chart as PNG")]
Svg = Annotated[Optional[Path], typer.Option("--svg", help="write the roofline chart as SVG (with --kind time: "
                                             "every layout measured is drawn)")]
Kind = Annotated[str, typer.Option("--kind", help="classic (achieved FLOP/s against FLOP/byte, one point per layer) "
                                   "or time (time against FLOPs and against bytes, every measured implementation of "
                                   "each layer; Wang et al. 2020)")]


@guarded
@scenario_options
def roofline(model: Model, batch: OneBatch = 1, dtype: OneDtype = "fp32", db: Db = None, system: System = None,
             scenario: ScenarioOptions = ScenarioOptions(), ceilings: Ceilings = "spec", png: Png = None,
             svg: Svg = None, json_out: Annotated[bool, typer.Option("--json", help="the roofline of every layer as "
                                                                     "JSON on stdout")] = False,
             kind: Kind = "classic"):
    """Roofline bound and library efficiency (bound / best measured) of every layer of MODEL, and the
    roofline chart (--kind classic) or the time-based roofline of every implementation (--kind time).

    Example: benanza roofline resnet50.onnx --batch 32 --dtype fp16 --db perf.db --kind time --svg roofline.svg"""
    req = RooflineRequest(scenarios(model, [batch], dtype, system, scenario)[0], db, ceilings, kind, png, svg)
    for flag, path in (("--png", png), ("--svg", svg)):
        check_output_file(flag, path)
    lbl.print_roofline(predict_uc.roofline(req), json_out)


From = Annotated[Optional[str], typer.Option("--from", help="measured system: id, fingerprint prefix or GPU name "
                                             "(as analyze --system)")]
To = Annotated[str, typer.Option("--to", help="GPU to predict for, from the spec table (e.g. h100-sxm, A100, L4, B200)")]
Memory = Annotated[str, typer.Option("--memory", help="memory term: l2 (warm working sets that fit the L2 scale with "
                                     "SMs x clock, the rest with DRAM bandwidth) or dram (Habitat's: all with DRAM "
                                     "bandwidth)")]
PredictTrain = Annotated[bool, typer.Option("--train", help="predict the training step (forward, loss, backward, "
                                            "optimizer; from `benanza bench --train`'s measurements) and whether its "
                                            "memory fits the target")]


@guarded
@scenario_options
def predict(model: Model, batch: OneBatch = 1, dtype: OneDtype = "fp32", origin: From = None, target: To = ...,
            db: Db = None, memory: Memory = "l2", scenario: ScenarioOptions = ScenarioOptions(),
            json_out: Annotated[bool, typer.Option("--json", help="the prediction per layer as JSON on stdout")] = False,
            train: PredictTrain = False, optimizer: Optimizer = None):
    """Predict MODEL's LBL on a GPU you do not have from its measurements on one you do (Habitat
    wave scaling, USENIX ATC 2021, with datasheet figures). --train: its training step.

    Example: benanza predict resnet50.onnx --batch 32 --dtype fp16 --from H200 --to A100-SXM4-80GB --db perf.db"""
    opt = spec_optimizer(optimizer, train)
    req = PredictRequest(scenarios(model, [batch], dtype, origin, scenario)[0], target, db, memory, train, opt)
    lbl.print_predict(predict_uc.predict(req), json_out)


@guarded
def report(inputs: Annotated[list[Path], typer.Argument(help="JSON files written by `benanza analyze --profile DIR "
                                                        "--json`")],
           html_out: Annotated[Optional[Path], typer.Option("--html", help="write a self-contained HTML "
                                                            "comparison")] = None):
    """Compare several analyses (models, batch sizes, data types or GPUs) side by side.

    Example: benanza report r50-fp16.json r50-fp32.json --html compare.html"""
    from benanza.reports.report import load_documents

    lbl.print_report(load_documents(list(inputs)), html_out)
