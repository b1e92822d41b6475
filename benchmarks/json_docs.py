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

