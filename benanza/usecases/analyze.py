"""``benanza analyze``: the lower-bound latency of a model's scenarios from the performance database,
their training steps, a decoder's step in LLM terms, and with a framework profile the insights
(what stands between the framework's measured latency and the LBL)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benanza.analysis.analyzer import Analysis, analyze as do_analyze
from benanza.analysis.insights import build_insights
from benanza.analysis.llm import llm_doc
from benanza.analysis.training import TrainingStep, training_step
from benanza.database.store import Database, System
from benanza.errors import UsageError
from benanza.processing.cache import process
from benanza.processing.model import ModelLayers
from benanza.profiles import load_profile
from benanza.profiles.profile import Profile, read_profile_json
from benanza.spec import AnalyzeRequest
from benanza.usecases.common import LowerBound, current_fingerprint, lower_bound, open_database
from benanza.usecases.progress import SILENT, Progress


@dataclass
class AnalyzeResult:
    """What ``analyze`` found: one :class:`~benanza.usecases.common.LowerBound` per scenario (batch x
    precision), the processed models (one per batch), the system and database read, with ``train``
    one training step per lower bound, per lower bound a decoder's step in LLM terms (None: not a
    decoder; without a profile), and with a profile its :class:`~benanza.profiles.profile.Profile` and
    the insights documents (one per lower bound)."""

    request: AnalyzeRequest
    lower_bounds: list[LowerBound]
    models: list[ModelLayers]
    system: System
    database: Database
    steps: list[TrainingStep] = field(default_factory=list)
    llms: list[dict | None] = field(default_factory=list)
    profile: Profile | None = None
    insights: list[dict] = field(default_factory=list)

    @property
    def analyses(self) -> list[Analysis]:
        return [lb.analysis for lb in self.lower_bounds]

    def documents(self) -> list[dict]:
        """The JSON documents (``analyze --json``): with a profile the insights documents, else each
        analysis (:meth:`benanza.analysis.analyzer.Analysis.to_dict`) with its training step under
        ``training_step`` and a decoder's step in LLM terms under ``llm``."""
        if self.profile is not None:
            return self.insights
        docs = [a.to_dict() for a in self.analyses]
        for d, t in zip(docs, self.steps):
            d["training_step"] = t.to_dict()
        for d, lt in zip(docs, self.llms):
            if lt is not None:
                d["llm"] = lt
        return docs


def check(req: AnalyzeRequest) -> None:
    """The request's own consistency, before any work; raises UsageError."""
    if req.trace is not None and (len({s.precision.name for s in req.scenarios}) > 1
                                  or len({s.batch for s in req.scenarios}) > 1):
        raise UsageError("--trace writes one schedule: give one --batch and one --dtype")
    if req.html is not None and req.profile is None:
        raise UsageError("--html needs --profile DIR (the report compares the framework with the LBL)")


def profile_batch(profile_dir: Path, batches: list[int], given: bool) -> int:
    """``analyze --profile DIR``: the profile's batch size; ``batches`` given (``given``) must be it."""
    pb = read_profile_json(profile_dir)["batch"]
    if given and batches != [pb]:
        raise UsageError(f"{profile_dir}: the profile was taken at batch {pb}; analyze --batch {pb}")
    return pb


def analyze(req: AnalyzeRequest, progress: Progress = SILENT) -> AnalyzeResult:
    """The request's lower bounds (:func:`~benanza.usecases.common.lower_bound`, the models processed
    once per batch), training steps, LLM terms or insights. Notices go to ``progress`` (the models',
    the database's, then the system resolver's). Raises UsageError, ModelError, DatabaseError."""
    check(req)
    s0 = req.scenarios[0]
    batches = list(dict.fromkeys(s.batch for s in req.scenarios))
    prof = None
    if req.profile is not None:
        prof = load_profile(req.profile, s0.model, batches[0], dict(s0.dims), s0.batch_dim, req.allow_mismatch)
    mls = [process(s0.model, b, dict(s0.dims), s0.batch_dim) for b in batches]
    for ml in mls:
        for n in ml.notices:
            progress.notice(n)
    database = open_database(req.db)
    for n in database.notices:
        progress.notice(n)
    fingerprint = current_fingerprint()
    by_batch = {ml.batch: ml for ml in mls}
    lbs = [lower_bound(s, database, by_batch[s.batch], fingerprint) for s in req.scenarios]
    r = AnalyzeResult(req, lbs, mls, lbs[0].system, database, profile=prof)
    if req.train:
        r.steps = [training_step(lb.layers, lb.analysis, database, lb.system, req.optimizer) for lb in lbs]
    for note in dict.fromkeys(n for lb in lbs for n in lb.notices):
        progress.notice(note)
    if prof is not None:
        r.insights = insight_docs(prof, r.analyses, mls[0], database, r.system, s0.cache, s0.layouts)
    else:
        r.llms = [llm_doc(lb.layers, lb.analysis, database, lb.system) for lb in lbs]
    return r


def insight_docs(prof: Profile, results: list[Analysis], ml: ModelLayers, database: Database, system: System,
                 cache: str, layouts, phase: str | None = None) -> list[dict]:
    """The insights documents of ``results`` against profile ``prof`` (Q6 against fp32, or tf32 for
    an fp32 run, when the database has them complete); a decoder's (``phase``, or found by
    :func:`benanza.analysis.llm.decoder_phase`) with its step in LLM terms under ``llm``. The one
    source of insights documents: ``analyze --profile``, ``benanza torch`` and
    :func:`benanza.api.analyze_module` all come here."""
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
