"""The training step table of `analyze --train` and `bench --train`: one row per step, each phase's
sum in ms, or what it lacks: a phase without a measurement says so, never 0 ms."""
from __future__ import annotations

from rich.text import Text

from benanza.reports.tables import Col, FitTable


def phase_cell(ms: float | None, why: str = "not measured") -> str:
    """A phase's sum (ms, 4 decimals), or ``why`` when it has no figure (None)."""
    return f"{ms:.4f}" if ms is not None else why


def training_step_table(steps) -> FitTable:
    """One row per :class:`benanza.analysis.training.TrainingStep`: its LBL (critical path, ms) and
    sequential sum, marked incomplete when partial; each phase of ``phase_ms`` (``not measured`` for a
    phase none of whose calls is measured, the loss ``not counted`` when the model has none), and
    whether the step is complete."""
    st = FitTable("training step LBL, ms: forward + backward, critical path; partial sums marked incomplete",
                  [Col("model", "name"), Col("batch", "num"), Col("dtype", "name"), Col("LBL ms", "num"),
                   Col("sequential ms", "num", drop=2), Col("forward ms", "num", drop=1),
                   Col("loss ms", "num", drop=3), Col("bwd data ms", "num", drop=1), Col("bwd weight ms", "num", drop=1),
                   Col("optimizer ms", "num", drop=3), Col("complete")])
    for t in steps:
        mark = "" if t.complete else " incomplete"
        ph = t.phase_ms
        st.add_row(t.model, str(t.batch), t.precision_label, f"{t.critical_path_ms:.4f}{mark}",
                   f"{t.sequential_ms:.4f}{mark}", phase_cell(ph.get("forward")),
                   phase_cell(ph.get("loss"), "not measured" if not t.loss_measured else "not counted"),
                   phase_cell(ph.get("backward_data")), phase_cell(ph.get("backward_weight")),
                   phase_cell(ph.get("optimizer")),
                   "yes" if t.complete else Text(f"no: {t.missing_count} missing", style="red"))
    return st
