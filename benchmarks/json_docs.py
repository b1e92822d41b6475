"""How the benchmark scripts read benanza's ``--json`` output: the envelope of JSON schema 1
(``{"document", "schema", "system", "scenarios" | "records" | the result's keys}``,
benanza/reports/documents.py) and the shapes benanza printed before it, which the recorded runs
under benchmarks/results hold and a script may read again (``--merge``, ``--resume``, a saved
``*.json``): ``from json_docs import scenarios_of``."""
from __future__ import annotations

import sys
from pathlib import Path

# the repository's benanza only where none is installed (the scripts run from a GPU machine's checkout)
sys.path.append(str(Path(__file__).resolve().parent.parent))


def scenarios_of(doc, where: str = "benanza's --json output") -> list[dict]:
    """The scenario documents of ``analyze``, ``predict``, ``roofline``, ``layers``, ``torch`` or
    ``bench`` ``--json`` output, parsed (:func:`benanza.reports.documents.scenarios`; before schema 1
    an object or a list of them, and ``bench``'s object with ``analyses``). Raises ValueError (the
    line of :class:`benanza.errors.UsageError`) naming ``where`` for a document of a newer schema, one
    without scenarios, or a scenario that is not an object."""
    from benanza.errors import UsageError
    from benanza.reports.documents import scenarios

    if isinstance(doc, dict) and "schema" not in doc and isinstance(doc.get("analyses"), list):
        doc = doc["analyses"]  # bench --json before schema 1
    try:
        return scenarios(doc, where)
    except UsageError as e:
        raise ValueError(str(e)) from None


def records_of(doc, where: str = "benanza's --json output") -> list[dict]:
    """The records of ``db systems``, ``db query``, ``db compare``, ``ceilings`` or a cluster ``run``
    ``--json`` output, parsed: the envelope's ``records``; before schema 1 the bare list (db), or
    ``ceilings``' object's ``ceilings`` and ``run``'s ``runs``. Raises ValueError naming ``where``
    for anything else."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("records", "ceilings", "runs"):
            if isinstance(doc.get(key), list):
                return doc[key]
    raise ValueError(f"{where} has no records (not a benanza --json list of rows)")


def gpu_name(doc) -> str | None:
    """The GPU a ``--json`` output's figures are of: the envelope's ``system.gpu_name``; before
    schema 1 ``ceilings`` printed the name as ``system`` and other documents a system object."""
    s = doc.get("system") if isinstance(doc, dict) else None
    return s if isinstance(s, str) or s is None else s.get("gpu_name")
