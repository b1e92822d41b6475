"""``benanza db ...``: the performance database's commands, each handed to :mod:`benanza.usecases.db`
and its result to :mod:`benanza.reports.db`."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benanza.cli.app import check_output_file, guarded, progress
from benanza.lazy import LazyModule
from benanza.cli.options import Db, Fmt
from benanza.errors import UsageError

report = LazyModule("benanza.reports.db")
uc = LazyModule("benanza.usecases.db")

SystemSel = Annotated[Optional[str], typer.Option("--system", help="id, fingerprint prefix or GPU name")]
Json = Annotated[bool, typer.Option("--json", help="JSON on stdout (same as --format json)")]


@guarded
def db_systems(db: Db = None, fmt: Fmt = "table", json_out: Json = False):
    """The systems measured, with their versions and measurement counts.

    Example: benanza db systems --db db/reference/h200.sqlite.gz"""
    database, rows = uc.systems(db, progress())
    report.print_systems(database, rows, "json" if json_out else fmt.lower())


def params(items: list[str] | None) -> dict[str, str]:
    """``--param NAME=VALUE`` (repeatable) -> a dict; UsageError for another form."""
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise UsageError(f"--param {it!r}: expected NAME=VALUE (e.g. group=1, x=32x64x56x56)")
        out[k] = v
    return out


def _opt(t, name: str, help: str):
    return Annotated[t, typer.Option(name, help=help)]


@guarded
def db_query(db: Db = None, system: SystemSel = None,
             model: _opt(Optional[str], "--model", "ONNX file or a model name in the database") = None,
             kind: _opt(Optional[list[str]], "--kind", "layer kind (Conv, Gemm, ...)") = None,
             param: _opt(Optional[list[str]], "--param", "config field: NAME=VALUE") = None,
             batch: _opt(Optional[int], "--batch", "with --model: the model's batch size (its layer configs at that "
                         "batch); without: the layer configs' batch count (dim 0 of the first input; a GEMM's number "
                         "of products)") = None,
             dtype: _opt(Optional[str], "--dtype", "precision: fp32, tf32, fp16, bf16, fp8") = None,
             math: _opt(Optional[str], "--math", "fma, tf32, tensor_op, none") = None,
             call: _opt(Optional[str], "--call", "library call contains") = None,
             algorithm: _opt(Optional[str], "--algorithm", "algorithm or engine contains") = None,
             status: _opt(Optional[str], "--status", "ok, not_supported, skipped, failed") = None,
             cache: _opt(Optional[str], "--cache", "warm or cold") = None,
             best: _opt(bool, "--best", "only the fastest valid measurement per layer config") = False,
             sort: _opt(str, "--sort", "field to sort by, e.g. median_ms, kind, algorithm") = "median_ms",
             desc: _opt(bool, "--desc", "sort descending") = False,
             limit: _opt(Optional[int], "--limit", "at most this many rows") = None, fmt: Fmt = "table"):
    """Measurements filtered by system, model, layer kind, config fields, data type, math, algorithm,
    batch, status; sorted; as a table, CSV or JSON (a list of measurement records).

    Example: benanza db query --model resnet50.onnx --batch 32 --best --dtype fp16 --format csv"""
    from benanza.database.query import Filters

    # one meaning of batch: with --model it selects the model's configs, never their own batch count as well
    f = Filters(system=system, model=model, model_batch=batch, kind=kind, params=params(param),
                precision=None if best else dtype, math=math, call=call, algorithm=algorithm,
                batch_count=None if model else batch, status=status, cache=cache, sort=sort, descending=desc,
                limit=limit)
    report.print_measurements(*uc.measurements(db, f, best, dtype, progress()), fmt.lower())


@guarded
def db_shared(model: Annotated[str, typer.Argument(help="ONNX file or model name in the database")],
              batch: _opt(Optional[int], "--batch", "the model's batch size (default: any)") = None, db: Db = None,
              system: _opt(Optional[str], "--system", "id, fingerprint prefix or GPU name (default: any system)") = None,
              dtype: _opt(str, "--dtype", "data type: fp32, tf32, fp16, bf16, fp8") = "fp32",
              json_out: _opt(bool, "--json", "the counts as JSON on stdout") = False):
    """How many of MODEL's unique layer configs are already measured (what a run still has to do).

    Example: benanza db shared resnet50.onnx --batch 32 --dtype fp16 --db perf.db"""
    report.print_shared(model, batch, dtype, uc.shared(db, model, batch, system, dtype, progress()), json_out)


@guarded
def db_compare(system_a: Annotated[str, typer.Argument(help="system A (id, fingerprint prefix, GPU name)")],
               system_b: Annotated[str, typer.Argument(help="system B")], db: Db = None,
               dtype: _opt(str, "--dtype", "the data type compared (fp32, tf32, fp16, bf16, fp8)") = "fp32",
               cache: _opt(str, "--cache", "warm or cold measurements") = "warm", fmt: Fmt = "table"):
    """Per layer config measured on both systems: the best times and their ratio (B / A). Exits 2 when
    the two systems have nothing in common in that data type.

    Example: benanza db compare H100 H200 --dtype fp16 --db db/reference/h100_h200_fp16.sqlite.gz"""
    rows = uc.compare(db, system_a, system_b, dtype, cache, progress())
    report.print_compare(rows, system_a, system_b, dtype, cache, fmt)


@guarded
def db_export(output: Annotated[Path, typer.Option("-o", "--output", help="new SQLite file")], db: Db = None,
              system: _opt(Optional[str], "--system", "only this system") = None,
              model: _opt(Optional[list[str]], "--model", "only these models' configs") = None,
              batch: _opt(Optional[int], "--batch", "with --model: the model's batch size") = None,
              fmt: _opt(str, "--format", "sqlite (a benanza database for `db import`), gbench (Google Benchmark's "
                        "JSON, for its tools/compare.py; one system) or nvbench (NVBench's JSON, for its "
                        "nvbench_compare.py; one system)") = "sqlite"):
    """Write chosen systems and models to a portable SQLite file (merge it elsewhere with `db import`),
    or one system's measurements as Google Benchmark or NVBench JSON.

    Example: benanza db export --system H200 --format gbench -o h200.json (then
    compare.py benchmarks h100.json h200.json)"""
    if fmt in ("sqlite", "gbench", "nvbench") and not output.exists():
        check_output_file("-o", output)
    report.print_export(uc.export(db, output, system, model, batch, fmt, progress()), fmt, output)


@guarded
def db_import(source: Annotated[str, typer.Argument(help="a benanza database file or URL, or a public GEMM "
                                                    "table (.csv or .csv.gz)")], db: Db = None,
              json_out: _opt(bool, "--json", "the import counts as JSON on stdout") = False):
    """Merge SOURCE into the database: per job (config x precision x system) the newer one wins; a job
    without a valid time never replaces one that has one. A public GEMM table (db/reference/xgpu:
    aiconfigurator's or NeuSight's columns) becomes one system per GPU, its provenance in the system
    record, each row a measurement of the layer config benanza keys for that GEMM; importing it again
    rewrites the same rows.

    Example: benanza db import colleague.db --db perf.db; benanza db import
    db/reference/xgpu/neusight_fp32_linear_bmm.csv.gz --db perf.db"""
    from benanza.reports.progress import spinner
    from benanza.reports.terminal import err

    st = uc.import_(db, source, progress(), lambda what: spinner(err, what, enabled=not json_out))
    report.print_import(source, st, json_out)


@guarded
def db_upgrade(db: Db = None):
    """Bring a database written by an older benanza to the current schema (migrations).

    Example: benanza db upgrade --db perf.db"""
    report.print_upgrade(*uc.upgrade(db))
