"""The library API: a thin facade over the use cases (:mod:`benanza.usecases`), which the CLI calls too.

One request gives one answer whichever way it is asked: every command that prints an LBL for one
scenario prints the same figure, the headline LBL (:attr:`benanza.analysis.analyzer.Analysis.lbl_ms`:
fused, critical path, in every layout the scenario allows), said with :meth:`Analysis.lbl_text`, which
marks a partial sum ``INCOMPLETE`` with the one count of missing layers; :func:`analyze_module` and
``benanza torch`` return the same documents. The values (:class:`Scenario`, :class:`Timing`, the
requests) are :mod:`benanza.spec`'s: frozen, validated field by field. Nothing here prints.

    from benanza import api
    s = api.Scenario.of("resnet50.onnx", batch=32, dtype="fp16")
    r = api.lower_bound(s, db="perf.db")
    print(r.analysis.lbl_text())       # 1.2304 ms (fused, critical path, nchw+nhwc)
"""
from __future__ import annotations

import os
from pathlib import Path

from benanza.spec import (TIMING, AnalyzeRequest, BenchRequest, PredictRequest, RooflineRequest,
                          Scenario, Timing, TorchRequest, parse_layouts, parse_precisions)
from benanza.usecases.analyze import AnalyzeResult, analyze
from benanza.usecases.bench import BenchResult, model_list, run_options
from benanza.usecases.bench import bench as _bench
from benanza.usecases.common import LowerBound, current_fingerprint, lower_bound, open_database, training
from benanza.usecases.predict import PredictResult, RooflineResult
from benanza.usecases.predict import predict as _predict, roofline as _roofline
from benanza.usecases.torch import TorchResult, example_batches, torch
from benanza.usecases.torch import analyze_module as _analyze_module

__all__ = [
    "Scenario", "Timing", "TIMING", "AnalyzeRequest", "BenchRequest", "PredictRequest", "RooflineRequest",
    "TorchRequest", "LowerBound", "AnalyzeResult", "BenchResult", "PredictResult", "RooflineResult", "TorchResult",
    "open_database", "current_fingerprint", "lower_bound", "training", "analyze", "predict", "predict_training",
    "roofline", "bench", "run_options", "model_list", "torch", "analyze_module",
]


def predict(s: Scenario, target: str, db=None, memory: str = "l2") -> PredictResult:
    """The scenario's LBL predicted on GPU ``target`` (a spec-table name) from its measurements
    (Habitat wave scaling; :func:`benanza.usecases.predict.predict`): the lower bound, the
    :class:`benanza.analysis.predict.Prediction` (from the headline LBL) and its error bar. Raises
    UsageError for an unknown GPU or memory model, and as :func:`lower_bound`."""
    return _predict(PredictRequest(s, target, db, memory))


def predict_training(s: Scenario, target: str, db=None, memory: str = "l2", optimizer: str = "sgd") -> PredictResult:
    """The scenario's training step with ``optimizer`` predicted on GPU ``target``
    (:class:`benanza.analysis.predict_training.TrainingPrediction` in ``.prediction``: each call by
    Habitat wave scaling, and whether the step's peak-memory bound fits). Raises as :func:`predict`."""
    return _predict(PredictRequest(s, target, db, memory, train=True, optimizer=optimizer))


def roofline(s: Scenario, db=None, ceilings: str = "spec", kind: str = "classic") -> RooflineResult:
    """The roofline of the scenario's layers on the measured GPU's ``ceilings`` (``spec``: datasheet;
    ``measured``: ``benanza ceilings``' rows): :class:`benanza.usecases.predict.RooflineResult`
    (``kind="time"``: with the time-based roofline). Raises UsageError as :func:`lower_bound`."""
    return _roofline(RooflineRequest(s, db, ceilings, kind))


def bench(model, **options) -> BenchResult:
    """The main job, in this process, silently (:func:`benanza.usecases.bench.bench`): process
    ``model`` (a path, or several: a zoo), generate, compile and run one suite of their unique jobs,
    store the measurements and analyze every batch and data type. ``options``: the fields of
    :class:`BenchRequest` (``batches``, ``precisions`` or ``dtypes="fp32,fp16"``, ``layouts``,
    ``timing``, ``db``, ``output``, ``kinds``, ``torch``, ``conv_tf32``, ``dims`` (a dict),
    ``batch_dim``, ``train``, ``optimizer``, ``cluster``, ``gpu_kinds``, ``quiet``). Raises
    UsageError, ModelError, DatabaseError, DeviceError, LibraryError as the stages do."""
    models = (model,) if isinstance(model, (str, os.PathLike)) else tuple(model)
    o = dict(options)
    if "dtypes" in o:
        o["precisions"] = tuple(parse_precisions(o.pop("dtypes")))
    if "layouts" in o:
        o["layouts"] = tuple(parse_layouts(o["layouts"]))
    o["dims"] = tuple((o.get("dims") or {}).items())
    for k in ("batches", "kinds", "gpu_kinds"):
        if o.get(k) is not None:
            o[k] = tuple(o[k])
    return _bench(BenchRequest(tuple(Path(m) for m in models), **o))


def analyze_module(module, example_inputs, *, batch: int | list[int] | None = None, dtype: str = "fp16",
                   db: str | None = None, out: str | os.PathLike | None = None, device: str = "cuda",
                   batch_dims: tuple[int, ...] | None = None, channels_last: bool = False, compile: str | None = None,
                   bench: bool = True, name: str | None = None, timing: Timing = TIMING) -> list[dict]:
    """benanza for a module object, in this process: export it to ONNX, bench its layers (the bench
    use case, with ``timing``), profile the module itself in a child process and analyze each run
    against the LBL, as ``benanza torch`` does (the same use case: the same documents, also written as
    ``report-*.json`` in ``out``). ``example_inputs``: a tensor or tuple of tensors (their batch dim,
    ``batch_dims`` or 0, is resized to each batch); ``batch``: one or several batch sizes (default:
    the example's); ``dtype``: fp16, bf16, fp32 (PyTorch's default math) or tf32; ``db``: the
    performance database (default benanza's); ``out``: the working folder (default
    ``./benanza-torch-NAME``). The profiling child loads the module with ``torch.load`` from
    ``OUT/module.pt``: its class must be importable (not defined in ``__main__``). Returns one
    insights document per profiled run. Raises UsageError for bad arguments or a module torch.save
    cannot write, and the errors of the stages."""
    req = TorchRequest(f"{type(module).__module__}.{type(module).__qualname__} object",
                       example_batches(example_inputs, batch, batch_dims), dtype, db,
                       Path(out) if out is not None else None, device, channels_last, compile, bench, timing,
                       force=True)
    return _analyze_module(module, example_inputs, req, batch_dims, name).documents

