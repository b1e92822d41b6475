"""Analyzer: lower-bound latency (LBL) of a model from the performance database.

Definitions (Benanza, IPDPS 2020; docs/design.md, "Definitions"):

* a layer's time is its fastest *valid* measurement (status ok, finite median) in the requested
  precision (storage data types :data:`benanza.kinds.ACCEPTED_DTYPES` and the math modes
  :data:`benanza.kinds.ACCEPTED_MATH` allows; fp8: FP8 GEMMs, every other layer, and a GEMM FP8
  does not support, from its fp16 measurements);
  zero-cost layers take 0 ms; a layer without a valid measurement has *no* time: the LBL is then
  marked incomplete and the layer is listed with the reason, never counted as 0 ms;
* LBL_sequential = sum of the layer times;
* LBL_parallel = the critical path of the layer DAG weighted by the layer times (equal to the
  sequential LBL for a chain);
* the fused LBL replaces each fusion candidate by the faster of its layers and the best
  measurement of the fused call (along the critical path, the layers' own critical path: their sum
  for a chain, their longest branch for parallel ones; in the sequential sum, their sum):
  Conv + bias -> Relu (cudnnConvolutionBiasActivationForward), attention MatMul -> scale -> mask ->
  Softmax -> MatMul (cuDNN fused SDPA), a decomposed LayerNorm (cuDNN layernorm), an erf-GELU chain
  (one GELU); see ``model.Fusion``.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from benanza import kinds as L
from benanza.database import query
from benanza.analysis import roofline
from benanza.kinds.precision import BYTES_PER_ELEMENT, Precision
from benanza.database.store import Database, Measurement, System
from benanza.kinds.backend import Backend
from benanza.errors import UsageError
from benanza.generation.generator import layout_keys, nhwc_job
from benanza.processing.model import Layer, ModelLayers


@dataclass
class LayerTime:
    """A layer's lower-bound time and the measurement it comes from."""

    layer: Layer
    status: str  # measured / zero_cost / missing
    time_ms: float | None = None
    call: str = ""
    algorithm: str = ""
    math: str = ""
    iqr_ms: float | None = None
    converged: bool | None = None
    note: str = ""
    reason: str = ""
    heuristic_algorithm: str = ""
    heuristic_ms: float | None = None
    layout: str = ""  # the measurement's tensor layout (NCHW / NHWC)
    #: a Transpose between channels-first and channels-last order in an analysis that lets layers
    #: run NHWC: a layout conversion, reported apart and not part of the bound (its time is 0 there)
    conversion: bool = False
    #: a layer without a measurement of its own inside a fusion group whose fused call is measured:
    #: the fused LBL counts it (in the group's time), the unfused sums cannot
    covered: bool = False
    #: when the best measurement is the framework's own kernel: the fastest library call (cuDNN,
    #: cuBLAS, benanza's kernels) and its time, for the "framework beats the libraries" list
    library_call: str = ""
    library_ms: float | None = None
    #: the runtime of the measurement (:class:`benanza.kinds.backend.Backend`); its call's name shows it
    backend: Backend = Backend.SUITE

    @property
    def bound_ms(self) -> float | None:
        """The layer's share of the LBL (ms): its time, 0 for zero-cost layers and layout
        conversions, None when it has no valid measurement."""
        if self.conversion:
            return 0.0
        return self.time_ms

    def to_dict(self) -> dict:
        ly = self.layer
        return {
            "index": ly.index, "name": ly.name, "op": ly.op_type,
            "kind": ly.config.kind if ly.config else None, "key": ly.key,
            "description": ly.config.describe() if ly.config else None,
            "input_shapes": [list(s) if s is not None else None for s in ly.input_shapes],
            "output_shapes": [list(s) if s is not None else None for s in ly.output_shapes],
            "status": self.status, "time_ms": self.time_ms, "call": self.call or None,
            "algorithm": self.algorithm or None, "math": self.math or None, "iqr_ms": self.iqr_ms,
            "converged": self.converged, "note": self.note or None, "reason": self.reason or None,
            "heuristic_algorithm": self.heuristic_algorithm or None, "heuristic_ms": self.heuristic_ms,
            "fusion": ly.fusion, "layout": self.layout or None, "layout_conversion": self.conversion,
            "covered_by_fusion": self.covered,
            "library_call": self.library_call or None, "library_ms": self.library_ms,
        }


@dataclass
class FusionTime:
    layers: tuple[int, ...]
    key: str
    unfused_ms: float | None
    fused_ms: float | None
    algorithm: str = ""
    call: str = ""
    description: str = ""  # the fused config's describe()
    library_call: str = ""  # when the fused best is the framework's kernel: the fastest library call
    library_ms: float | None = None
    #: the headline (fused) LBL takes this group as one fused call
    applied: bool = False
    #: a training step counts this group layer by layer (:func:`benanza.kinds.training_counts_layers`)
    training_layers: bool = False
    #: the runtime of the fused measurement (:class:`benanza.kinds.backend.Backend`)
    backend: Backend = Backend.SUITE
    #: the fused call's config (the experts' grouped GEMM of an eager experts loop: its routing and experts)
    config: object = None

    @property
    def faster_than_sum(self) -> bool:
        """The fused call is faster than its layers' sum, or the only time for a member (the fused
        sequential LBL takes it fused)."""
        return self.fused_ms is not None and (self.unfused_ms is None or self.fused_ms < self.unfused_ms)

    @property
    def profit_ms(self) -> float:
        if self.unfused_ms is None or self.fused_ms is None:
            return 0.0
        return max(0.0, self.unfused_ms - self.fused_ms)


@dataclass
class Analysis:
    """The LBL of one model at one batch size and precision on one system."""

    model: str
    batch: int
    precision: str
    cache: str
    system: dict
    layers: list[LayerTime]
    lbl_sequential_ms: float
    lbl_parallel_ms: float
    critical_path: list[int]
    lbl_fused_sequential_ms: float
    lbl_fused_parallel_ms: float
    fusions: list[FusionTime] = field(default_factory=list)
    layouts: tuple[str, ...] = ("NCHW",)
    #: the precision of the convolutions (the analysis precision unless given: PyTorch's fp32 default
    #: runs cuDNN convolutions in tf32)
    conv_precision: str = ""
    #: adjacent layout-sensitive layers whose best measurements are in different layouts: the
    #: conversions the bound does not count ({"count": edges, "bytes": their tensors' bytes})
    layout_switches: dict = field(default_factory=lambda: {"count": 0, "bytes": 0})
    #: the headline schedule: each layer's weight in the fused LBL (ms; a fusion group's time on its
    #: last layer, 0 on the others; 0 for a layer without a measurement) and its critical path
    fused_weight: list[float] = field(default_factory=list)
    fused_critical_path: list[int] = field(default_factory=list)
    #: with several ``layouts``: each layout's layout-sensitive kinds the model has configs of that get a
    #: job in it ({layout: [kinds]}), and those of them without a single valid measurement in that layout on
    #: this system ({layout: [kinds]}): a layout asked for and not measured, said in :attr:`layouts_label`
    layout_kinds: dict = field(default_factory=dict)
    unmeasured_layouts: dict = field(default_factory=dict)

    #: what the headline figure is, in every command that prints it
    LBL_KIND = "fused, critical path"

    @property
    def missing(self) -> list[LayerTime]:
        """Layers without a valid measurement that no measured fusion candidate computes: the
        headline (fused) LBL is a partial sum while there are any."""
        return [t for t in self.layers if t.status == "missing" and not t.covered]

    @property
    def complete(self) -> bool:
        """The headline LBL has a time for every layer (its own, or its fusion group's)."""
        return not self.missing

    @property
    def complete_unfused(self) -> bool:
        """Every layer has a measurement of its own (the unfused figures are full sums)."""
        return not any(t.status == "missing" for t in self.layers)

    @property
    def measured_layers(self) -> int:
        return sum(1 for t in self.layers if t.status == "measured")

    def kind_precision(self, kind: str) -> str:
        """The precision a layer or call of ``kind`` is looked up in: the convolutions' (and cuDNN
        RNNs', :data:`benanza.kinds.CUDNN_TF32_KINDS`) ``conv_precision``, else :attr:`precision`."""
        return (self.conv_precision or self.precision) if kind in L.CUDNN_TF32_KINDS else self.precision

    @property
    def precision_label(self) -> str:
        """``fp32``, or ``fp32+tf32conv`` when the convolutions ran in another precision."""
        cp = self.conv_precision or self.precision
        return self.precision if cp == self.precision else f"{self.precision}+{cp}conv"

    @property
    def lbl_ms(self) -> float:
        """The headline lower-bound latency (ms): fused (each fusion group at the faster of its
        fused measurement and its layers' own critical path, :func:`group_span`) along the critical
        path of the layer DAG. A partial sum when the analysis is incomplete (:attr:`complete`)."""
        return self.lbl_fused_parallel_ms

    @property
    def layouts_label(self) -> str:
        """The layouts the figures draw on: ``nchw+nhwc``; a layout asked for whose layer kinds have no
        measurement in it on this system is said, ``nchw (nhwc not measured)``, or ``nchw+nhwc (nhwc not
        measured for Pooling)`` when only some kinds lack it (:attr:`unmeasured_layouts`)."""
        measured, notes = [], []
        for lay in self.layouts:
            gone = self.unmeasured_layouts.get(lay, [])
            if not gone:
                measured.append(lay.lower())
            elif set(gone) >= set(self.layout_kinds.get(lay, gone)):
                notes.append(f"{lay.lower()} not measured")
            else:
                measured.append(lay.lower())
                notes.append(f"{lay.lower()} not measured for {', '.join(gone)}")
        return ("+".join(measured) or "no layout measured") + (f" ({'; '.join(notes)})" if notes else "")

    @property
    def lbl_name(self) -> str:
        """What :attr:`lbl_ms` is, e.g. ``fused, critical path, nchw+nhwc`` (:attr:`layouts_label`;
        ``, cold cache`` added for cold measurements, L2 flushed before each call): the one LBL every
        command prints for this scenario (analyze, roofline, predict, the trace, insights)."""
        return f"{self.LBL_KIND}, {self.layouts_label}" + (", cold cache" if self.cache == "cold" else "")

    @property
    def incomplete_note(self) -> str:
        """Empty for a complete LBL; else ``INCOMPLETE: N layers without a valid measurement (a
        partial sum, not a bound)``, N being :attr:`missing`'s count, the one count every output gives."""
        if self.complete:
            return ""
        n = len(self.missing)
        return (f"INCOMPLETE: {n} layer{'s' if n != 1 else ''} without a valid measurement "
                "(a partial sum, not a bound)")

    def lbl_text(self, digits: int = 4) -> str:
        """The headline LBL as every command prints it: ``1.2304 ms (fused, critical path,
        nchw+nhwc)``, followed by :attr:`incomplete_note` when layers are missing."""
        note = f" {self.incomplete_note}" if self.incomplete_note else ""
        return f"{self.lbl_ms:.{digits}f} ms ({self.lbl_name}){note}"

    def fused_groups(self) -> dict[int, "FusionTime"]:
        """The fusion groups the headline LBL takes fused (their fused call faster than their
        layers' critical path, :func:`group_span`, or the only time for a member), by the index of
        the group's last layer."""
        return {f.layers[-1]: f for f in self.fusions if f.applied}

    @property
    def conversion_layers(self) -> list[LayerTime]:
        return [t for t in self.layers if t.conversion]

    @property
    def conversion_ms(self) -> float:
        """Measured time (ms) of the layout-conversion Transposes the bound leaves out."""
        return sum(t.time_ms or 0.0 for t in self.conversion_layers)

    @property
    def precision_note(self) -> str:
        """What the figures are when they are not the precision's own measurements: an fp8 analysis
        whose FP8 layers (:data:`benanza.kinds.FP8_KINDS`) took no FP8 measurement is every layer's
        fp16 time (FP8 absent from the database, or slower). Empty otherwise."""
        if self.precision != "fp8":
            return ""
        fp8_layers = [t for t in self.layers if t.layer.config is not None and t.layer.config.kind in L.FP8_KINDS]
        if any(t.math.startswith("fp8") for t in fp8_layers):
            return ""
        why = (f"none of its {len(fp8_layers)} FP8-capable layers ({', '.join(L.FP8_KINDS)}) took an FP8 "
               "measurement (none in the database, or fp16 was faster)") if fp8_layers else \
            f"it has no FP8-capable layer ({', '.join(L.FP8_KINDS)})"
        return f"{self.model} batch {self.batch} fp8: {why}; every figure is the layer's {L.FP8_FALLBACK} measurement"

    def framework_faster(self) -> list[dict]:
        """Layers and fusion groups whose fastest measurement is the framework's own kernel, with
        the fastest library call's time: a finding for the library developers."""
        out = []
        for t in self.layers:
            if t.status == "measured" and t.backend.framework:
                out.append({"layers": [t.layer.index], "name": t.layer.name, "what": t.layer.config.describe(),
                            "framework_call": t.call, "framework_ms": t.time_ms,
                            "library_call": t.library_call or None, "library_ms": t.library_ms})
        for f in self.fusions:
            if f.fused_ms is not None and f.backend.framework:
                out.append({"layers": list(f.layers), "name": self.layers[f.layers[-1]].layer.name,
                            "what": f.description or f.key, "framework_call": f.call, "framework_ms": f.fused_ms,
                            "library_call": f.library_call or None, "library_ms": f.library_ms})
        return out

    def to_dict(self) -> dict:
        by_op = collections.Counter(t.layer.op_type for t in self.missing)
        return {
            "model": self.model, "batch": self.batch, "precision": self.precision,
            "conv_precision": self.conv_precision or self.precision, "cache": self.cache,
            "layouts": list(self.layouts), "layouts_label": self.layouts_label,
            "unmeasured_layouts": {k: list(v) for k, v in self.unmeasured_layouts.items()}, "system": self.system,
            "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
            "lbl_fused_sequential_ms": self.lbl_fused_sequential_ms,
            "lbl_fused_parallel_ms": self.lbl_fused_parallel_ms,
            "lbl_ms": self.lbl_ms, "lbl_kind": "fused parallel (critical path)", "lbl_name": self.lbl_name,
            "complete": self.complete, "complete_unfused": self.complete_unfused,
            "missing_layers": len(self.missing), "incomplete_note": self.incomplete_note or None,
            "precision_note": self.precision_note or None,
            "layout_conversions": {"layers": [t.layer.index for t in self.conversion_layers],
                                   "measured_ms": self.conversion_ms},
            "layout_switches": dict(self.layout_switches),
            "framework_faster": self.framework_faster(),
            "missing": [{"index": t.layer.index, "name": t.layer.name, "op": t.layer.op_type,
                         "reason": t.reason} for t in self.missing],
            "missing_by_op": dict(sorted(by_op.items())),
            "measured_layers": self.measured_layers,
            "zero_cost_layers": sum(1 for t in self.layers if t.status == "zero_cost"),
            # layers whose best measurement is channels-last (only with layouts NCHW and NHWC)
            "nhwc_best_layers": sum(1 for t in self.layers if t.status == "measured" and t.layout == "NHWC"),
            "critical_path": self.critical_path, "fused_critical_path": self.fused_critical_path,
            "fusions": [{"layers": list(f.layers), "key": f.key, "kind": f.key.split("-")[0],
                         "unfused_ms": f.unfused_ms, "fused_ms": f.fused_ms, "call": f.call or None,
                         "algorithm": f.algorithm or None, "profit_ms": f.profit_ms,
                          "applied": f.applied}
                        for f in self.fusions],
            "layers": [t.to_dict() for t in self.layers],
        }


def system_dict(s: System) -> dict:
    """The system of a document; a public table's system (not measured by benanza) with its
    ``provenance`` (:attr:`benanza.database.store.System.provenance`)."""
    d = {"id": s.id, "fingerprint": s.fingerprint, "gpu_name": s.gpu_name,
         "compute_capability": s.compute_capability, "sm_count": s.sm_count, "memory_bytes": s.memory_bytes,
         "max_sm_clock_mhz": s.max_sm_clock_mhz, "driver_version": s.driver_version,
         "runtime_version": s.runtime_version, "cudnn_version": s.cudnn_version,
         "cublas_version": s.cublas_version, "label": s.label()}
    if s.provenance is not None:
        d["provenance"] = s.provenance
    return d


def resolve_system(db: Database, spec: str | None, current_fingerprint: str | None = None) -> tuple[System, str]:
    """Pick the system to analyze: ``spec`` by :func:`benanza.database.query.match_systems`' rule (an
    id, a GPU name, a fingerprint prefix; a GPU name selects the whole GPU, a partition only by its
    ``[N SMs]`` name), else the current GPU if the database has it, else the whole GPU measured most
    recently (a partition only in a database without a whole GPU). Returns (system, notice). Raises
    :class:`UsageError` when nothing matches, when ``spec`` matches several systems (naming them), or
    when the database has no system."""
    systems = db.systems()
    if not systems:
        raise UsageError(f"database {db.safe_url} has no measurements; run `benanza bench` or `benanza run` first")
    if spec:
        ids = set(query.resolve_systems(db, spec))
        hits = sorted((s for s in systems if s.id in ids), key=lambda s: s.id)
        if len(hits) > 1:
            names = "; ".join(f"id {s.id}: {s.gpu_name} ({s.fingerprint[:12]})" for s in hits)
            raise UsageError(f"{len(hits)} systems match {spec!r} ({names}); choose one with --system "
                             "(an id, a fingerprint or the full GPU name)")
        return hits[0], ""
    if current_fingerprint:
        for s in systems:
            if s.fingerprint == current_fingerprint:
                return s, ""
    whole = [s for s in systems if not query.is_partition(s.gpu_name)] or systems
    latest = db.latest_system([s.id for s in whole]) or whole[-1]
    note = "" if len(systems) == 1 else (f"{len(systems)} systems in the database; using the most recently "
                                         f"measured{' whole GPU' if len(whole) < len(systems) else ''}, id "
                                         f"{latest.id} ({latest.gpu_name}); choose with --system")
    return latest, note


def _failure_reason(config: L.LayerConfig, rows: list[Measurement], jobs: list, precision: str) -> str:
    """Why a layer has no valid measurement in ``precision``, from its rows and job records."""
    needed = L.precisions_for(config, [precision])
    ran = [j for j in jobs if j.precision in needed]
    if not ran:
        return f"not measured on this system in {precision} (run `benanza bench` or `benanza run`)"
    failed = [j.message for j in ran if j.status == "failed" and j.message]
    if failed:
        return "job failed: " + failed[0]
    relevant = [m for m in rows if m.dtype in L.ACCEPTED_DTYPES[precision] and m.precision in needed]
    if not relevant:
        return f"no {' or '.join(L.ACCEPTED_DTYPES[precision])} measurement was recorded"
    counts = collections.Counter(m.status for m in relevant)
    first = next((m.message for m in relevant if m.status != "ok" and m.message), "")
    parts = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))
    return f"no valid measurement ({parts})" + (f": {first}" if first else "")


#: the heuristic whose pick the per-layer table shows
HEURISTIC_SOURCE = "cudnnGetConvolutionForwardAlgorithm_v7"
#: GEMMs: cuBLASLt's heuristic (its first pick, timed as a cublasLtMatmul config)
LT_HEURISTIC_SOURCE = "cublasLtMatmulAlgoGetHeuristic"


def _heuristic_picks(db: Database, system_id: int, keys: list[str], precision: str, cache: str,
                     source: str = HEURISTIC_SOURCE,
                     call_like: str = "cudnnConvolutionForward%") -> dict[str, tuple[str, float | None]]:
    """key -> (algorithm ``source`` ranks first, its measured time among the ``call_like`` calls)."""
    import sqlalchemy as sa

    from benanza.database.store import Choice

    out: dict[str, tuple[str, float | None]] = {}
    with db.session() as s:
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            top = dict(s.execute(sa.select(Choice.layer_key, Choice.algorithm).where(
                Choice.system_id == system_id, Choice.layer_key.in_(chunk), Choice.precision == precision,
                Choice.source == source, Choice.rank == 0, Choice.status == "ok")).all())
            if not top:
                continue
            times = collections.defaultdict(list)
            for key, algo, ms in s.execute(sa.select(Measurement.layer_key, Measurement.algorithm,
                                                     Measurement.median_ms).where(
                    Measurement.system_id == system_id, Measurement.layer_key.in_(list(top)),
                    Measurement.precision == precision, Measurement.cache == cache, Measurement.status == "ok",
                    Measurement.call.like(call_like), Measurement.median_ms.is_not(None))):
                if top.get(key) == algo:
                    times[key].append(ms)
            for key, algo in top.items():
                out[key] = (algo, min(times[key]) if times.get(key) else None)
    return out


def _drop_tensor_core_fp32(db: Database, system: System, ml: ModelLayers, best: dict, cache: str,
                           layouts: tuple[str, ...], rejected: dict[str, str]) -> None:
    """fp32 analyses: replace a GEMM's fastest measurement when it is faster than FP32 FMA math
    allows (:func:`benanza.analysis.roofline.implausible_fma`; databases written before the runner relabelled
    such measurements) by its fastest plausible one, or drop it (``rejected`` says why)."""
    configs = {ly.key: ly.config for ly in ml.benchmarked()} | {f.config.key: f.config for f in ml.fusions}
    bad = [k for k, b in best.items() if k in configs and roofline.implausible_fma(
        configs[k], b.median_ms, system.sm_count, system.max_sm_clock_mhz)]
    if not bad:
        return
    rows = collections.defaultdict(list)
    serves = query.Serves("fp32", cache, tuple(layouts))
    for m in db.measurements(system.id, bad, cache=cache):
        if serves(m):
            rows[m.layer_key].append(m)
    for k in bad:
        why = roofline.implausible_fma(configs[k], best[k].median_ms, system.sm_count, system.max_sm_clock_mhz)
        ok = sorted((m for m in rows[k] if not roofline.implausible_fma(
            configs[k], m.median_ms, system.sm_count, system.max_sm_clock_mhz)), key=lambda m: (m.median_ms, m.id))
        if not ok:
            del best[k]
            rejected[k] = f"no FP32 FMA measurement: the fastest {why}"
            continue
        best[k] = query.record_by_id(db, ok[0].id)


def analyze(ml: ModelLayers, db: Database, system: System, precision: str, cache: str = "warm",
            layouts: tuple[str, ...] = ("NCHW",), conv_precision: str | None = None) -> Analysis:
    """Compute the LBL of ``ml`` on ``system`` in ``precision`` (:data:`benanza.kinds.PRECISIONS`) from
    warm (default) or cold measurements, taking each layer's fastest measurement in one of
    ``layouts`` (("NCHW",): the model as it is; ("NCHW", "NHWC"): convolutions and their neighbours
    (BatchNorm, Pooling, per-channel Elementwise) may run channels-last, layout conversions not
    counted; layout-agnostic layers keep their NCHW measurement). Never raises for missing data: the result says
    what is missing. ``conv_precision``: the convolutions (and cuDNN RNNs: :data:`benanza.kinds.CUDNN_TF32_KINDS`) in this
    precision instead, e.g. ``tf32`` in an ``fp32`` analysis: PyTorch's default, which runs cuDNN
    convolutions with TF32 (``torch.backends.cudnn.allow_tf32``) and matmuls without. Raises
    :class:`UsageError` for an unknown precision, cache or layout."""
    _check_analysis_arguments(precision, cache, layouts, conv_precision)
    conv_precision = conv_precision or precision
    found = _lookups(ml, db, system, precision, conv_precision, cache, tuple(layouts))
    conversions = layout_conversions(ml) if "NHWC" in layouts else set()
    times = [_layer_time(ly, found, ly.index in conversions) for ly in ml.layers]
    weight = [t.bound_ms or 0.0 for t in times]
    seq = sum(weight)
    par, path = critical_path(ml.edges, weight)
    fusions, fused_weight, seq_weight = _fusion_times(ml, times, weight, found)
    fseq = sum(seq_weight)
    fpar, fpath = critical_path(ml.edges, fused_weight)
    # every group fused where faster than its layers' sum is also a schedule of the fused critical
    # path: where it is the shorter (a group whose layers leave and re-enter it), the headline takes it
    spar, spath = critical_path(ml.edges, seq_weight)
    if spar < fpar:
        fused_weight, fpar, fpath = seq_weight, spar, spath
        for ft in fusions:
            ft.applied = ft.faster_than_sum
    return Analysis(model=ml.model, batch=ml.batch, precision=precision, conv_precision=conv_precision,
                    cache=cache, system=system_dict(system),
                    layers=times, lbl_sequential_ms=seq, lbl_parallel_ms=par, critical_path=path,
                    lbl_fused_sequential_ms=fseq, lbl_fused_parallel_ms=fpar, fusions=fusions,
                    layouts=tuple(layouts), layout_switches=_layout_switches(ml, times, precision),
                    fused_weight=fused_weight, fused_critical_path=fpath,
                    **_layout_coverage(ml, db, system, found.prec, cache, tuple(layouts)))


def _layout_coverage(ml: ModelLayers, db: Database, system: System, prec: dict[str, str], cache: str,
                     layouts: tuple[str, ...]) -> dict:
    """With several layouts: for each, the layout-sensitive kinds of ``ml`` that get a job in it
    (:func:`benanza.generation.generator.layout_keys`) and those without one valid measurement in it
    on ``system`` (``prec``: key -> the precision it is analyzed in). Empty dicts for one layout: its
    layers' own measurements say what is missing."""
    if len(layouts) < 2:
        return {"layout_kinds": {}, "unmeasured_layouts": {}}
    kinds, gone = {}, {}
    for lay in layouts:
        by_kind = layout_keys(ml, lay)
        keys = sorted({k for ks in by_kind.values() for k in ks})
        have = _per_precision(prec, lambda p, ks: query.best_per_config(db, system.id, p, cache, ks, (lay,)), keys)
        kinds[lay] = list(by_kind)
        lacking = [kind for kind, ks in by_kind.items() if not any(k in have for k in ks)]
        if lacking:
            gone[lay] = lacking
    return {"layout_kinds": kinds, "unmeasured_layouts": gone}


def _check_analysis_arguments(precision: str, cache: str, layouts: tuple[str, ...],
                              conv_precision: str | None) -> None:
    """Raise :class:`UsageError` for an unknown precision (or ``conv_precision``), cache or layout."""
    Precision.of(precision)  # the one validator of a precision name
    Precision.of(conv_precision or precision)
    if cache not in ("warm", "cold"):
        raise UsageError(f"cache must be warm or cold, got {cache!r}")
    if not layouts or any(lay not in ("NCHW", "NHWC") for lay in layouts):
        raise UsageError(f"layouts must be NCHW and/or NHWC, got {', '.join(layouts) or 'none'}")


@dataclass
class _Lookups:
    """What the database holds for one analysis' configs (layer and fusion keys). ``prec``: key ->
    the precision it is analyzed in; ``best``: key -> its fastest valid measurement
    (:func:`benanza.database.query.best_per_config`); ``rejected``: key -> why its fp32 rows were
    dropped (:func:`_drop_tensor_core_fp32`); ``by_key``/``jobs``: for keys without a best, every
    row and job record (to say why); ``picks``: key -> (heuristic algorithm, its time in ms);
    ``library``: for keys whose best is the framework's own call, the fastest library call."""

    prec: dict[str, str]
    best: dict
    rejected: dict[str, str]
    by_key: dict[str, list[Measurement]]
    jobs: dict[str, list]
    picks: dict
    library: dict


def _per_precision(prec: dict[str, str], fn, some: list[str]) -> dict:
    """``fn(precision, keys)`` for each precision the keys are analyzed in (``prec``), merged."""
    out: dict = {}
    for p in sorted({prec[k] for k in some}):
        part = [k for k in some if prec[k] == p]
        out.update(fn(p, part) if part else {})
    return out


def _lookups(ml: ModelLayers, db: Database, system: System, precision: str, conv_precision: str, cache: str,
             layouts: tuple[str, ...]) -> _Lookups:
    """The database's rows for every benchmarked layer and fusion candidate of ``ml`` (:class:`_Lookups`):
    the convolutions (:data:`benanza.kinds.CUDNN_TF32_KINDS`) in ``conv_precision``, the rest in ``precision``."""
    configs = {ly.key: ly.config for ly in ml.benchmarked()} | {f.config.key: f.config for f in ml.fusions}
    keys = sorted(configs)
    prec = {k: conv_precision if configs[k].kind in L.CUDNN_TF32_KINDS else precision for k in keys}
    # the fastest valid measurement per config: one windowed query (benanza.database.query.best_per_config)
    best = _per_precision(prec, lambda p, ks: query.best_per_config(db, system.id, p, cache, ks, layouts), keys)
    rejected: dict[str, str] = {}
    if precision == "fp32" and best:
        _drop_tensor_core_fp32(db, system, ml, best, cache, layouts, rejected)
    # only for configs without one: every row and job record, to say why
    missing_keys = [k for k in keys if k not in best]
    by_key: dict[str, list[Measurement]] = collections.defaultdict(list)
    for m in db.measurements(system.id, missing_keys, cache=cache) if missing_keys else []:
        by_key[m.layer_key].append(m)
    jobs: dict[str, list] = collections.defaultdict(list)
    for j in db.job_rows(system.id, missing_keys) if missing_keys else []:
        jobs[j.layer_key].append(j)
    # convolutions have no FP8 implementation: an fp8 analysis shows their fp16 heuristic picks
    picks = _per_precision(prec, lambda p, ks: _heuristic_picks(db, system.id, ks, L.FP8_FALLBACK if p == "fp8" else p,
                                                                cache), keys)
    picks.update(_per_precision(prec, lambda p, ks: _heuristic_picks(db, system.id, ks, p, cache, LT_HEURISTIC_SOURCE,
                                                                     "cublasLtMatmul%"), keys))
    framework_best = [k for k, b in best.items() if b.backend.framework]
    library = _per_precision(prec, lambda p, ks: query.best_per_config(db, system.id, p, cache, ks, layouts,
                                                                       source="library"), framework_best)
    return _Lookups(prec, best, rejected, by_key, jobs, picks, library)


def _layer_time(ly: Layer, found: _Lookups, conversion: bool) -> LayerTime:
    """Layer ``ly``'s time: 0 ms when zero-cost; its best measurement (with the library's best when
    that is the framework's call, and the heuristic pick); or none, with the reason."""
    if ly.status == "zero_cost":
        return LayerTime(ly, "zero_cost", 0.0, reason=ly.reason)
    if ly.status == "unsupported":
        return LayerTime(ly, "missing", None, reason=f"unsupported: {ly.reason}")
    b = found.best.get(ly.key)
    if b is None:
        return LayerTime(ly, "missing", None, reason=found.rejected.get(ly.key) or _failure_reason(
            ly.config, found.by_key.get(ly.key, []), found.jobs.get(ly.key, []), found.prec[ly.key]))
    lt = LayerTime(ly, "measured", b.median_ms, call=b.call, algorithm=b.algorithm, math=b.math,
                   iqr_ms=b.iqr_ms, converged=b.converged, note=b.note or "", layout=b.layout,
                   conversion=conversion, backend=b.backend)
    if ly.key in found.library:
        lt.library_call, lt.library_ms = found.library[ly.key].call, found.library[ly.key].median_ms
    if ly.key in found.picks:
        lt.heuristic_algorithm, lt.heuristic_ms = found.picks[ly.key]
    return lt


def _fusion_times(ml: ModelLayers, times: list[LayerTime], weight: list[float],
                  found: _Lookups) -> tuple[list[FusionTime], list[float], list[float]]:
    """Each fusion candidate's unfused (sum of its layers' bounds) and fused time (ms), and the
    layer weights of the two fused LBLs: the fused call computes every layer of the group, so it
    replaces them where it is faster, and stands for the group where a member has no measurement of
    its own (an op only the fused call implements, e.g. torch.export's IsNaN guard inside an
    attention; that member is then marked ``covered``). Returns (the groups, the weights of the
    fused critical path, the weights of the fused sequential sum).

    "Faster" differs between the two: the sequential sum takes a group fused where its call is
    faster than its layers' sum; the critical path (the headline) where it is faster than the
    group's own critical path, its layers run as the parallel LBL runs them (:func:`group_span`).
    For a chain of layers the two are the same; for a group of parallel branches, e.g. SwiGLU's
    gate and up GEMMs, a fused call between their longest branch and their sum shortens the
    sequential LBL and lengthens the critical path, and the headline leaves it unfused
    (:attr:`FusionTime.applied`). :func:`analyze` keeps the shorter of this critical path and that
    of the sequential sum's weights."""
    fusions: list[FusionTime] = []
    fused_weight, seq_weight = list(weight), list(weight)
    for f in ml.fusions:
        parts = [times[i] for i in f.layers]
        unfused = None if any(p.bound_ms is None for p in parts) else sum(p.bound_ms for p in parts)
        b = found.best.get(f.config.key)
        ft = FusionTime(f.layers, f.config.key, unfused, b.median_ms if b else None, b.algorithm if b else "",
                        b.call if b else "", f.config.describe(), training_layers=L.training_counts_layers(f.config),
                        backend=b.backend if b else Backend.SUITE, config=f.config)
        if f.config.key in found.library:
            ft.library_call, ft.library_ms = found.library[f.config.key].call, found.library[f.config.key].median_ms
        fusions.append(ft)
        if ft.fused_ms is None:
            continue
        span = None if unfused is None else group_span(ml.edges, f.layers, weight)
        for w, take in ((seq_weight, ft.faster_than_sum), (fused_weight, span is None or ft.fused_ms < span)):
            if take:
                for i in f.layers[:-1]:
                    w[i] = 0.0
                w[f.layers[-1]] = ft.fused_ms
        ft.applied = span is None or ft.fused_ms < span
        if ft.faster_than_sum:
            for p in parts:
                if p.status == "missing":
                    p.covered = True
                    p.reason = f"computed by the fused {f.config.kind} candidate ({p.reason})"
    return fusions, fused_weight, seq_weight


def group_span(edges: dict[int, list[int]], layers: tuple[int, ...] | list[int], weight: list[float]) -> float:
    """The critical path (ms) of a fusion group's own layers: the longest chain of ``weight`` (ms per
    layer) through the edges between them (:func:`critical_path` of the group's subgraph). Their sum
    when they form a chain, their longest branch when they are parallel."""
    order = sorted(layers)
    local = {g: i for i, g in enumerate(order)}
    sub = {local[g]: [local[p] for p in edges.get(g, ()) if p in local] for g in order}
    return critical_path(sub, [weight[g] for g in order])[0]


#: Transpose permutations that turn channels-first (N, C, spatial...) into channels-last
#: (N, spatial..., C) order or back, by rank
def _channels_last_perms(rank: int) -> set[tuple[int, ...]]:
    if rank < 3:
        return set()
    to_last = (0,) + tuple(range(2, rank)) + (1,)
    to_first = (0, rank - 1) + tuple(range(1, rank - 1))
    return {to_last, to_first}


def layout_conversions(ml: ModelLayers) -> set[int]:
    """Indices of the Transposes that are layout conversions when layers may run channels-last: in
    a model with convolutions, a Transpose of rank 4 or 5 between channels-first and
    channels-last order (ConvNeXt's and Swin's ``permute(0, 2, 3, 1)`` around their norms and
    linears), and a rank-3 ``(0, 2, 1)`` of a convolution's output whose spatial dims a Reshape
    merged (ViT's patch embedding). With the convolution writing channels-last, each is the
    identity on memory: the bound leaves it out and the analysis reports it apart."""
    convs = [ly for ly in ml.layers if ly.config is not None and ly.config.kind == "Conv"]
    if not convs:
        return set()
    producer = {o: ly for ly in ml.layers for o in ly.outputs}
    out: set[int] = set()
    for ly in ml.layers:
        cfg = ly.config
        if not isinstance(cfg, L.CopyConfig) or cfg.op != "Transpose":
            continue
        perm = tuple(cfg.attr("perm"))
        r = len(perm)
        if perm not in _channels_last_perms(r):
            continue
        if r in (4, 5):
            out.add(ly.index)
            continue
        # rank 3: (N, C, H*W) -> (N, H*W, C) of a convolution's output reshaped (merged spatial dims)
        src = producer.get(ly.inputs[0]) if ly.inputs else None
        while src is not None and src.status == "zero_cost" and src.op_type in ("Reshape", "Flatten") and src.inputs:
            src = producer.get(src.inputs[0])
        if src is not None and src.config is not None and src.config.kind == "Conv" \
                and tuple(src.config.output_shape()[:2]) == tuple(cfg.inputs[0][:2]):
            out.add(ly.index)
    return out


def _layout_switches(ml: ModelLayers, times: list[LayerTime], precision: str) -> dict:
    """Edges between two layout-sensitive layers whose best measurements are in different layouts:
    a conversion the framework would run there, which the bound does not count (count, bytes)."""
    def sensitive(t: LayerTime) -> bool:  # its NCHW and NHWC measurements read memory differently
        return t.status == "measured" and bool(t.layout) and nhwc_job(t.layer.config, True)

    count, nbytes = 0, 0
    elem = BYTES_PER_ELEMENT.get(precision, 4)
    for i, preds in ml.edges.items():
        ti = times[i]
        if not sensitive(ti):
            continue
        for p in preds:
            tp = times[p]
            if sensitive(tp) and tp.layout != ti.layout:
                count += 1
                shape = tp.layer.output_shapes[0] if tp.layer.output_shapes else None
                nbytes += elem * L.numel(shape) if shape else 0
    return {"count": count, "bytes": nbytes}


def critical_path(edges: dict[int, list[int]], weight: list[float]) -> tuple[float, list[int]]:
    """Longest weighted path through a DAG whose nodes are numbered in topological order.

    ``edges[i]``: the predecessors of node i; ``weight[i]``: its time (ms). Returns (length in ms,
    the nodes on the path in order). O(nodes + edges).
    """
    n = len(weight)
    finish = [0.0] * n
    prev = [-1] * n
    for i in range(n):
        start, arg = 0.0, -1
        for p in edges.get(i, ()):
            if p >= i:
                raise ValueError(f"edge {p} -> {i} is not in topological order")
            if finish[p] > start:
                start, arg = finish[p], p
        finish[i] = start + weight[i]
        prev[i] = arg
    if n == 0:
        return 0.0, []
    end = max(range(n), key=lambda i: finish[i])
    length = finish[end]
    path = []
    while end != -1:
        path.append(end)
        end = prev[end]
    return length, list(reversed(path))
