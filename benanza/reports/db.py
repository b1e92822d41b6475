"""The terminal tables, CSV and JSON of the ``db`` commands."""
from __future__ import annotations

import json
import sys

from benanza.errors import UsageError
from benanza.reports.safe_text import csv_cell, terminal_text
from benanza.reports.tables import Col, FitTable, fmt_ms
from benanza.reports.documents import envelope
from benanza.reports.terminal import err, out, print_json

def emit(rows: list[dict], fmt: str, title: str, columns: list[Col | str] | None = None,
         document: str = "db", system=None) -> None:
    """Rows as a table, CSV or JSON (command ``document``'s envelope with the rows as ``records``,
    :mod:`benanza.reports.documents`) on stdout. ``columns``: the table's, by row
    key (a :class:`Col` whose header is the key, or the key); a ``*_ms`` column shows times with
    their unit (ms or µs) under the key without ``_ms``. CSV and JSON keep every key and raw value
    (in CSV, a list or dict value is its JSON text; a text that a spreadsheet would run as a formula
    gets a leading ``'``, :func:`benanza.reports.safe_text.csv_cell`)."""
    fmt = fmt.lower()
    if fmt == "json":
        print_json(envelope(document, system=system, records=rows), default=str)
        return
    specs = [c if isinstance(c, Col) else Col(c) for c in (columns or (list(rows[0].keys()) if rows else []))]
    cols = [c.header for c in specs]
    if fmt == "csv":
        import csv

        # each text cell formula-safe (csv_cell); on a terminal (not a file or a pipe) its control
        # characters made visible as well (terminal_text)
        safe = (lambda v: terminal_text(csv_cell(v)) if isinstance(v, str) else v) if sys.stdout.isatty() else csv_cell
        w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0].keys()) if rows else cols, extrasaction="ignore")
        w.writer.writerow([safe(k) for k in w.fieldnames])  # the header, formula-safe too
        for r in rows:  # a list or dict column (details, params) as JSON, never a Python repr
            w.writerow({k: safe(json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else v)
                        for k, v in r.items()})
        return
    if fmt != "table":
        raise UsageError(f"--format must be table, csv or json, not {fmt!r}")
    t = FitTable(title, [Col(c.header[:-3], "num", c.drop) if c.header.endswith("_ms") else c for c in specs])
    for r in rows:
        t.add_row(*[cell(r.get(c), c) for c in cols])
    out.print(t)


def cell(v, key: str = "") -> str:
    if key.endswith("_ms"):
        return fmt_ms(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if key == "ratio" else f"{v:.6g}"
    return str(v)


def db_notices(database) -> None:
    for n in database.notices:
        err.print(f"notice: {n}", markup=False, soft_wrap=True)


def short_gpu(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``: the GPU's name without the vendor and the memory or
    form-factor words (``80GB``, ``HBM3``, ``PCIe``, ``SXM5``, ``NVL``)."""
    import re

    words = [w for w in name.split() if w != "NVIDIA" and not re.fullmatch(r"\d+GB|HBM\d*e?|PCIe|SXM\d*|NVL", w)]
    return " ".join(words) or name


def print_systems(database, rows: list[dict], fmt: str) -> None:
    """``db systems``: the systems as a table (library versions as text), CSV or JSON (integers)."""
    from benanza.versions import version_text

    if fmt != "json":  # JSON keeps the libraries' integers
        for r in rows:
            for k, lib in (("cudnn_version", "cudnn"), ("cublas_version", "cublas"), ("runtime_version", "cuda")):
                r[k] = version_text(lib, r.get(k))
    # a public table's system (benanza.database.public_tables) says where its numbers come from
    source = [Col("source", "name")] if any(r.get("provenance") for r in rows) else []
    emit(rows, fmt, f"systems in {database.safe_url}",
         [Col("id", "num"), Col("fingerprint", "name", drop=5), Col("gpu_name", "name"), *source,
          Col("compute_capability", "name", drop=2), Col("sm_count", "num", drop=1),
          Col("driver_version", "name", drop=4), Col("runtime_version", "name", drop=3), Col("cudnn_version", "name"),
          Col("cublas_version", "name"), Col("measurements", "num"), Col("valid", "num", drop=6)], "db systems")


def print_measurements(title: str, recs: list, fmt: str) -> None:
    """``db query``: measurement records as a table, CSV or JSON."""
    emit([r.to_dict() for r in recs], fmt, title,
         [Col("system_id", "num", drop=7), Col("kind", "name", drop=6), Col("description"),
          Col("precision", "name", drop=5), Col("call", "name", drop=4), Col("algorithm", "token"),
          Col("math", "name", drop=3), Col("cache", "name", drop=2), Col("status", "name", drop=8),
          Col("median_ms", "num"), Col("iqr_ms", "num", drop=9), Col("samples", "num", drop=10),
          Col("converged", "name", drop=1)], "db query")


def print_shared(model: str, batch, dtype: str, r: dict, json_out: bool) -> None:
    """``db shared``: the counts as JSON or one line."""
    if json_out:
        print_json(envelope("db shared", **r))
        return
    out.print(f"{model} (batch {batch or 'any'}, {dtype}): {r['measured']} of {r['unique_configs']} unique layer "
              f"configs already measured ({r['shared_fraction']:.0%}); {r['to_measure']} to measure", markup=False)


def print_compare(rows: list[dict], system_a: str, system_b: str, dtype: str, cache: str, fmt: str) -> None:
    """``db compare``: per layer config both systems' best times and their ratio; CSV and JSON keep
    the stable keys (a_ms, b_ms, a_system, ...)."""
    import numpy as np

    a, b = short_gpu(rows[0]["a_system"]), short_gpu(rows[0]["b_system"])
    if a == b:  # two systems of one GPU model (other drivers, libraries): named by their ids
        a, b = f"{a} ({system_a})", f"{b} ({system_b})"
    title = (f"{len(rows)} layer configs measured on both {a} and {b} in {dtype} ({cache}); median ratio "
             f"{b}/{a} {np.median([r['ratio'] for r in rows]):.3f}")
    if fmt.lower() != "table":
        emit(rows, fmt, title, document="db compare")
        return
    shown = [{"kind": r["kind"], "description": r["description"], f"{a}_ms": r["a_ms"], f"{b}_ms": r["b_ms"],
              f"{b}/{a}": f"{r['ratio']:.3f}", f"{a} algorithm": r["a_algorithm"], f"{b} algorithm": r["b_algorithm"]}
             for r in rows]
    emit(shown, fmt, title, [Col("kind", "name", drop=3), Col("description"), Col(f"{a}_ms", "num"),
                             Col(f"{b}_ms", "num"), Col(f"{b}/{a}", "num"), Col(f"{a} algorithm", drop=1),
                             Col(f"{b} algorithm", drop=1)])


def print_export(r, fmt: str, output) -> None:
    """``db export``: what was written (a sharing export's counts and notes, or a JSON document)."""
    if fmt in ("gbench", "nvbench"):
        what = (f"{len(r['benchmarks'])} measurements of {r['context']['host_name']} as Google Benchmark JSON"
                if fmt == "gbench" else f"{len(r['benchmarks'])} benchmarks of {r['devices'][0]['name']} as "
                f"NVBench JSON")
        for w in (r.get("meta", {}).get("benanza", {}).get("warnings") or []) if fmt == "nvbench" else []:
            err.print(f"benanza: warning: {terminal_text(w)}", markup=False, highlight=False)
        out.print(f"exported {what} to {output}", markup=False)
        return
    out.print(f"exported {r.jobs_added} jobs, {r.measurements_written + r.orphans_written} measurements, "
              f"{r.systems_added} systems, {r.configs_added} layer configs to {output}", markup=False)
    for n in r.notes:
        err.print(f"benanza: note: {n}", markup=False)


def print_import(source: str, st, json_out: bool) -> None:
    """``db import``: the import's counts as JSON or one line (a public table's: a line, then one
    per GPU, :func:`print_table_import`)."""
    if json_out:
        print_json(envelope("db import", **st.to_dict()))
        return
    if hasattr(st, "systems") and hasattr(st, "provenance"):  # a public table (benanza.database.public_tables)
        print_table_import(source, st)
        return
    out.print(f"imported from {source}: {st.jobs_added} jobs added, {st.jobs_replaced} replaced by newer, "
              f"{st.jobs_kept} kept (not newer); {st.measurements_written + st.orphans_written} measurements, "
              f"{st.systems_added} systems, {st.configs_added} layer configs, {st.models_added} models, "
              f"{st.ceilings_written} ceilings, {st.counters_written} kernel counters added; "
              f"{st.rows_per_s:.0f} rows/s", markup=False)


def print_table_import(source: str, st) -> None:
    """``db import`` of a public table: what was stored, where it comes from, and per GPU its system
    and the rows it received per data type (and op)."""
    p = st.provenance
    dup = f", {st.duplicates} repeated rows left out" if st.duplicates else ""
    out.print(f"imported public table {source} ({p.get('source')}: {p.get('repository')}@{str(p.get('commit'))[:12]}, "
              f"{p.get('license')}; not measured by benanza): {st.rows} rows{dup}; {st.measurements_written} "
              f"measurements written, {st.systems_added} systems, {st.configs_added} layer configs, "
              f"{st.jobs_added} jobs added", markup=False, soft_wrap=True)
    for s in st.systems:
        rows = ", ".join(f"{what} {n}" for what, n in s["rows"].items())
        spec = f"spec {s['spec']}" if s.get("spec") else "not in the spec table"
        out.print(f"  system {s['id']} {s['gpu_name']} ({spec}, fingerprint {s['fingerprint']}"
                  f"{', new' if s['new'] else ''}): {rows}", markup=False, soft_wrap=True)


def print_upgrade(database, schema: int) -> None:
    """``db upgrade``: the migrations' notices, or that the schema is current."""
    for n in database.notices:
        out.print(n, markup=False, soft_wrap=True)
    if not database.notices:
        out.print(f"{database.safe_url}: schema {schema} is current", markup=False)
