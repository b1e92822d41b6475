"""The prior (``bench``/``run --prior SOURCE``; docs/timing.md, "Prior"): measurements already known
for this GPU model rank each job's candidates, and only the contenders, with a sample of the others, are
timed on this machine.

For each job of the suite (a layer key in one precision and layout), the prior's warm measurements of that
job on a system of the same GPU name (:func:`prior_systems`: those with this machine's cuDNN and cuBLAS
versions where the prior has them, else every one of that GPU, and the plan says the versions differ) give:

* the **contenders**: every (call, algorithm) whose valid median (the LBL's rule,
  :class:`benanza.database.query.Serves`, the suite's calls only) is within ``margin`` (default
  :data:`PRIOR_MARGIN`, 10 %) of the prior's best median for the job;
* the **sample**: of the other candidates the prior measured (slower, raced out, screened, not supported),
  those whose sha256 of ``job|call|algorithm`` is 0 modulo ``sample_every`` (default :data:`SAMPLE_EVERY`,
  one in 8), and at least one per job with others, so that a prior that no longer holds (a driver, clock
  or library change) shows as a sampled candidate beating the contenders;
* ``known``: every candidate the prior measured for the job (a candidate it recorded as skipped, beyond
  ``--max-engines``, over the workspace limit or on an earlier prior's word, was not measured: unknown). The harness (``suite --prior FILE``,
  ``cpp/include/benanza/prior.hpp``) times a candidate that is a contender, sampled, or unknown to the
  prior (an engine config of a newer library), and records the rest as ``skipped`` with
  :meth:`PriorPlan.message` and no time. A job the prior has no valid measurement of is timed in full.

Only rows of the job's own layout are ranked (a what-if layout's rows, e.g. paged KV caches, are not: their
candidates, unknown to the lists, are timed), and only the suite's jobs (the framework's own kernels are
timed as before).

The margin is a choice, not a measured constant: racing keeps a candidate whose confidence interval meets
the best's (docs/timing.md, "Racing"), and run-to-run spread of a job's best on one GPU is a few per cent
(docs/timing.md: the default's LBL within 2.7 % of ``--exhaustive``'s); 10 % leaves room for both. Opt-in
until a GPU run checks it against ``--exhaustive`` (``benchmarks/speed.py --policies default,prior,exhaustive``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from benanza.database.query import Serves
from benanza.database.store import Database, Measurement, System
from benanza.errors import UsageError

#: contenders: within this fraction of the prior's best median for the job (10 %)
PRIOR_MARGIN = 0.10
#: the sample of the other candidates: one in this many, by hash (at least one per job)
SAMPLE_EVERY = 8
#: ``--prior self``: the target database's own earlier runs
SELF = "self"
#: the prior file's format name and version (cpp/include/benanza/prior.hpp reads them)
FORMAT, VERSION = "benanza-prior", 1


@dataclass(frozen=True)
class PriorJob:
    """One job's lists: ``time`` (contenders and the sample) and ``known`` (every candidate the prior
    measured), each a sorted tuple of (call, algorithm); ``best_ms``: the prior's best median (ms)."""

    time: tuple[tuple[str, str], ...]
    known: tuple[tuple[str, str], ...]
    contenders: int
    sampled: int
    best_ms: float


@dataclass
class PriorPlan:
    """What the prior says for a suite: ``source`` (as given: a file, URL or ``self``), the GPU name, the
    prior's systems (labels), ``versions`` ("" when cuDNN and cuBLAS match this machine's, else what
    differs), the margin and sample rate, the jobs it has seen (job id -> :class:`PriorJob`) and the
    ids of the suite's jobs it has not (timed in full)."""

    source: str
    gpu_name: str
    systems: list[str]
    versions: str
    margin: float
    sample_every: int
    jobs: dict[str, PriorJob] = field(default_factory=dict)
    unseen: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``prior (SOURCE, GPU)``: whose word skipped a candidate."""
        return f"prior ({self.source}, {self.gpu_name})"

    def message(self) -> str:
        """The message of a candidate the prior left out (the harness's skipped record)."""
        return f"prior: not a contender on {self.gpu_name} ({self.source})"

    def to_json(self) -> dict:
        """The file the suite reads (``suite --prior FILE``; cpp/include/benanza/prior.hpp)."""
        return {"format": FORMAT, "version": VERSION, "message": self.message(), "source": self.source,
                "gpu_name": self.gpu_name, "systems": self.systems, "versions": self.versions,
                "margin": self.margin, "sample_every": self.sample_every, "unseen": self.unseen,
                "jobs": {j: {"time": [list(c) for c in p.time], "known": [list(c) for c in p.known],
                             "best_ms": p.best_ms} for j, p in sorted(self.jobs.items())}}

    def write(self, path: Path) -> Path:
        """Write :meth:`to_json` to ``path`` (UTF-8 JSON); returns ``path``."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
        return path

    def summary(self) -> dict:
        """The plan in the run's summary: source, GPU, systems, versions, margin, sample rate, jobs seen and not."""
        return {"source": self.source, "gpu_name": self.gpu_name, "systems": self.systems,
                "versions": self.versions, "margin": self.margin, "sample_every": self.sample_every,
                "jobs_seen": len(self.jobs), "jobs_unseen": len(self.unseen), "label": self.label}


def _same_gpu(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and " ".join(a.split()).lower() == " ".join(b.split()).lower()


def prior_systems(db: Database, system: dict) -> tuple[list[System], str]:
    """The prior's systems for this machine's system record ``system``: those of the same GPU name
    measured by benanza (a public table's systems are left out), newest first; those with the same cuDNN
    and cuBLAS versions when there are any, else all of them with a note saying how the versions
    differ (the second value; "" when they match). Raises UsageError when the prior has no such GPU."""
    rows = [s for s in db.systems() if _same_gpu(s.gpu_name, system.get("gpu_name")) and s.provenance is None]
    if not rows:
        names = sorted({s.gpu_name for s in db.systems()}) or ["none"]
        raise UsageError(f"--prior: no measurements of {system.get('gpu_name')} in the prior "
                         f"(its GPUs: {', '.join(names)})")
    rows.sort(key=lambda s: -s.id)
    same = [s for s in rows if s.cudnn_version == system.get("cudnn_version")
            and s.cublas_version == system.get("cublas_version")]
    if same:
        return same, ""
    s = rows[0]
    return rows, (f"versions differ: the prior's cuDNN {s.cudnn_version}, cuBLAS {s.cublas_version}; this "
                  f"machine's cuDNN {system.get('cudnn_version')}, cuBLAS {system.get('cublas_version')}")


def _full_algorithm(m: Measurement) -> str:
    """The algorithm's whole name (a long one is stored shortened, whole in ``details``)."""
    if m.details and '"algorithm"' in m.details:
        try:
            return str(json.loads(m.details).get("algorithm") or m.algorithm)
        except ValueError:
            pass
    return m.algorithm


def _hash(job: str, c: tuple[str, str]) -> int:
    return int(hashlib.sha256(f"{job}|{c[0]}|{c[1]}".encode()).hexdigest()[:16], 16)


def select(job: str, rows: list, precision: str, layout: str, margin: float = PRIOR_MARGIN,
           sample_every: int = SAMPLE_EVERY) -> PriorJob | None:
    """One job's lists from the prior's warm rows of it (``rows``: Measurement rows or anything with
    their fields, of one system; ``precision``, ``layout``: the job's; a skipped row is no evidence and
    leaves its candidate unknown), or None when none of them is a
    valid time of the suite's calls in that precision (the job is timed in full). Contenders: valid
    medians <= (1 + ``margin``) x the best; the sample: the others whose hash is 0 modulo
    ``sample_every``, or the one of least hash when none is."""
    serves = Serves(precision, "warm", layouts=(layout,), source="library")
    mine = [m for m in rows if m.layout == layout and not m.backend.framework and m.cache == "warm"]
    valid = [m for m in mine if serves(m)]
    if not valid:
        return None
    best = min(m.median_ms for m in valid)
    contenders = {(m.call, _full_algorithm(m)) for m in valid if m.median_ms <= best * (1.0 + margin)}
    known = {(m.call, _full_algorithm(m)) for m in mine if m.status != "skipped"}  # skipped: no evidence
    others = sorted(known - contenders, key=lambda c: (_hash(job, c), c))
    sample = {c for c in others if _hash(job, c) % sample_every == 0}
    if others and not sample:
        sample = {others[0]}
    return PriorJob(time=tuple(sorted(contenders | sample)), known=tuple(sorted(known)), contenders=len(contenders),
                    sampled=len(sample), best_ms=best)


def prior_plan(prior: Database, source: str, system: dict, jobs, margin: float = PRIOR_MARGIN,
               sample_every: int = SAMPLE_EVERY) -> PriorPlan:
    """The plan for the suite's ``jobs`` (:class:`benanza.kinds.base.Job`: id, layer_key, precision,
    layout) on this machine (``system``, its system record) from database ``prior`` (named ``source``
    in messages). Each job takes the rows of the newest of :func:`prior_systems` that measured it.
    Raises UsageError for a bad margin or sample rate, or a prior without this GPU."""
    if not 0 <= margin < 10:
        raise UsageError(f"--prior-margin must be in [0, 10), got {margin}")
    if sample_every < 1:
        raise UsageError(f"the prior's sample rate must be >= 1, got {sample_every}")
    systems, versions = prior_systems(prior, system)
    plan = PriorPlan(source=source, gpu_name=str(system.get("gpu_name")), systems=[s.label() for s in systems],
                     versions=versions, margin=margin, sample_every=sample_every)
    keys = sorted({j.layer_key for j in jobs})
    by_system: dict[int, dict] = {}
    for s in systems:
        rows: dict = {}
        for m in prior.measurements(s.id, keys, "warm"):
            rows.setdefault((m.layer_key, m.precision), []).append(m)
        by_system[s.id] = rows
    for j in jobs:
        pj = None
        for s in systems:
            pj = select(j.id, by_system[s.id].get((j.layer_key, j.precision), []), j.precision, j.layout, margin,
                        sample_every)
            if pj is not None:
                break
        if pj is None:
            plan.unseen.append(j.id)
        else:
            plan.jobs[j.id] = pj
    return plan


def open_prior(source: str, target: Database) -> tuple[Database, bool]:
    """The prior's database: ``target`` itself for :data:`SELF`, else ``source`` opened read-only (a
    file, a ``.gz`` reference database or a URL). The second value: whether the caller closes it.
    Raises DatabaseError with one line when it cannot be opened."""
    from benanza.database.store import open_db

    if source == SELF:
        return target, False
    return open_db(source, create=False), True
