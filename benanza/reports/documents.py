"""The one shape of every ``--json`` document, and its reader.

Every command's ``--json`` output is one JSON object, an *envelope*::

    {"document": "analyze",        # the command that wrote it ("db systems", "roofline", ...)
     "schema": 1,                  # SCHEMA: the version of these shapes
     "system": {...} | null,       # the system the figures are of (id, fingerprint, gpu_name, ...,
                                   # label), null where the command has none (layers, db import)
     "scenarios": [...]}           # one document per scenario, a list even for one

A command that lists database rows (``db systems``, ``db query``, ``db compare``, ``ceilings``)
has ``records`` (a list) instead of ``scenarios``; a command with one result (``db shared``,
``db import``, ``run``, ``profile``, ``system``) has that result's keys beside ``document``,
``schema`` and ``system``. ``bench`` has both its run (``stages``, ``run``, ``counters``) and its
``scenarios``. Every scenario that carries an LBL carries ``lbl_ms``, ``complete`` and
``missing_layers`` beside it (``predict --train``: the step's ``sequential_ms`` and
``critical_path_ms``).

The system is always ``system``; inside a scenario ``predict`` keeps ``origin`` (the measured GPU)
and ``target`` (the predicted one), ``roofline`` keeps ``gpu`` (whose ceilings), and an insights
document keeps ``gpu`` (the profiled device's name).

``schema`` 1 replaced the shapes of benanza 0.x before it (an analysis object, or a list for
several; a bare list of records): :func:`scenarios` reads both, so files written by an older
benanza still load (``benanza report``).
"""
from __future__ import annotations

from typing import Any

from benanza.errors import UsageError

#: the version of the ``--json`` shapes; raised when a key changes meaning or goes
SCHEMA = 1


def system_doc(system) -> dict | None:
    """A system as the envelope's ``system``: a :class:`benanza.database.store.System` through
    :func:`benanza.analysis.analyzer.system_dict`, a dict as it is, None as None."""
    if system is None or isinstance(system, dict):
        return system
    from benanza.analysis.analyzer import system_dict

    return system_dict(system)


def envelope(document: str, *, system=None, scenarios: list | None = None, records: list | None = None,
             **fields: Any) -> dict:
    """The ``--json`` document of command ``document`` (module docstring): ``document``, ``schema``,
    ``system`` (:func:`system_doc`), then ``fields``, then ``scenarios`` or ``records`` (a list;
    at most one of the two)."""
    if scenarios is not None and records is not None:
        raise ValueError("a document has scenarios or records, not both")
    d = {"document": document, "schema": SCHEMA, "system": system_doc(system), **fields}
    if scenarios is not None:
        d["scenarios"] = list(scenarios)
    if records is not None:
        d["records"] = list(records)
    return d


def scenarios(doc, where: str = "the document") -> list[dict]:
    """The scenario documents of a ``--json`` output or a saved report: an envelope's
    ``scenarios``; before schema 1, a bare document (one) or a list of them. Raises UsageError
    (naming ``where``) for an envelope of a newer schema or one without scenarios, and for a
    scenario that is not an object."""
    if isinstance(doc, list):  # several documents, as benanza wrote them before the envelope
        return _objects(doc, where)
    if not isinstance(doc, dict):
        raise UsageError(f"{where} is not a benanza JSON document (a JSON {type(doc).__name__})")
    if "document" not in doc or "schema" not in doc:
        return [doc]  # one document, as benanza wrote it before the envelope
    if not isinstance(doc["schema"], int) or doc["schema"] > SCHEMA:
        raise UsageError(f"{where} has JSON schema {doc['schema']!r}; this benanza reads schema {SCHEMA} and "
                         "older (upgrade benanza)")
    if not isinstance(doc.get("scenarios"), list):
        raise UsageError(f"{where} is benanza's {doc['document']!r} document, which has no scenarios")
    return _objects(doc["scenarios"], where)


def _objects(items: list, where: str) -> list[dict]:
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            raise UsageError(f"{where}: scenario {i} is not a JSON object (a JSON {type(d).__name__})")
    return items
