"""Tables follow the terminal (issue 17): at 80 and 120 columns no line is wider than the terminal,
numbers are whole, layer names keep their distinguishing end (`/layer2/…/downsample.0/Conv`), every
time has a unit; piped output is plain (no colour) and complete (no name cut)."""
import io
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import REPO, scenario_of, records_of
from benanza.reports.tables import Col, FitTable, fmt_ms, middle_ellipsis

REF = REPO / "db" / "reference" / "h200.sqlite.gz"
PAIR = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
CACHE = None


@pytest.fixture(scope="module", autouse=True)
def _own_cache(tmp_path_factory):
    """The reference databases unpacked into this module's own cache (not one other runs upgrade)."""
    global CACHE
    CACHE = tmp_path_factory.mktemp("cache")


def bz(*args, columns=None):
    """The command's stdout: on a terminal of ``columns`` (rich's TTY_COMPATIBLE), else piped."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR")}
    env["XDG_CACHE_HOME"] = str(CACHE)
    if columns:
        env.update(COLUMNS=str(columns), TTY_COMPATIBLE="1")
    p = subprocess.run([sys.executable, "-m", "benanza", *map(str, args)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _fits(text: str, width: int) -> list[str]:
    lines = ANSI.sub("", text).splitlines()
    wide = [ln for ln in lines if cell_len(ln) > width]
    assert not wide, f"{len(wide)} lines wider than {width}:\n" + "\n".join(wide[:3])
    return lines


def _rows(lines: list[str]) -> list[list[str]]:
    """The body cells of the tables in ``lines`` (rich's `│` rows)."""
    return [[c.strip() for c in ln.strip().strip("│").split("│")] for ln in lines if ln.startswith("│")]


def _column(lines: list[str], header: str) -> list[str]:
    """The non-empty body cells under ``header`` (a one-line header) of the table in ``lines``."""
    heads = [[c.strip() for c in ln.strip().strip("┃").split("┃")] for ln in lines if ln.startswith("┃")]
    i = next(h.index(header) for h in heads if header in h)
    return [r[i] for r in _rows(lines) if r[i]]


def _same_name(cell: str, name: str) -> bool:
    """``cell`` is ``name`` or ``name`` cut in the middle: head…tail with tail the name's end."""
    if "…" not in cell:
        return cell == name
    head, _, tail = cell.partition("…")
    return name.startswith(head) and name.endswith(tail) and len(tail) >= len(head)


@pytest.mark.parametrize("width", [80, 120])
def test_analyze_fits_the_terminal(models, width):
    model = models / "resnet18.onnx"
    lines = _fits(bz("analyze", model, "--batch", "1", "--db", REF, columns=width), width)
    doc = scenario_of(bz("analyze", model, "--batch", "1", "--db", REF, "--json"))
    names = {str(ly["index"]): ly["name"] for ly in doc["layers"]}
    times = {str(ly["index"]): f"{ly['time_ms'] * 1e3:.1f}" for ly in doc["layers"] if ly.get("time_ms")}
    seen = cut = 0
    for cells in _rows(lines):
        if len(cells) >= 4 and cells[0] in names and cells[1]:
            seen += 1
            assert _same_name(cells[1], names[cells[0]]), (cells[1], names[cells[0]])
            cut += "…" in cells[1]
            if cells[0] in times:  # the time is whole, in its own cell
                assert times[cells[0]] in cells, (times[cells[0]], cells)
    assert seen >= 40  # resnet18's layers, one line each
    if width == 80:  # the longest names do not fit: cut in the middle, the end kept
        assert cut and any("…/downsample.0/Conv" in c for r in _rows(lines) for c in r)


@pytest.mark.parametrize("width", [80, 120])
def test_db_tables_fit_and_times_have_units(models, width):
    outs = [bz("db", "compare", "H100", "H200", "--dtype", "fp16", "--db", PAIR, columns=width),
            bz("db", "query", "--db", REF, "--model", models / "resnet18.onnx", "--batch", "1", "--best", "--dtype",
               "fp16", columns=width),
            bz("db", "systems", "--db", REF, columns=width)]
    for text in outs:
        _fits(text, width)
    # db compare heads its columns with the GPUs' names (they were "a" and "b")
    for text, headers in ((outs[0], ("H100", "H200")), (outs[1], ("median",))):
        lines = ANSI.sub("", text).splitlines()
        for h in headers:  # times with their unit (they were raw floats like 4.32e-05)
            cells = _column(lines, h)
            assert len(cells) >= 8 and all(re.fullmatch(r"\d+(\.\d+)? (µs|ms)", c) for c in cells), cells[:5]
    assert "9.19.0" in outs[2]


@pytest.mark.parametrize("width", [80, 120])
def test_roofline_and_predict_fit(models, width):
    model = models / "resnet18.onnx"
    for args in (["roofline", model, "--batch", "1", "--db", REF],
                 ["roofline", model, "--batch", "1", "--db", REF, "--kind", "time"],
                 ["predict", model, "--batch", "1", "--from", "H200", "--to", "A100", "--db", REF]):
        _fits(bz(*args, columns=width), width)


def test_piped_output_is_plain_and_complete(models):
    model = models / "resnet18.onnx"
    text = bz("analyze", model, "--batch", "1", "--db", REF)
    assert "\x1b[" not in text and "…" not in text
    doc = scenario_of(bz("analyze", model, "--batch", "1", "--db", REF, "--json"))
    for ly in doc["layers"]:
        if ly.get("time_ms"):
            assert ly["name"] in text and ly["call"] in text, ly["name"]
    args = ["db", "query", "--db", REF, "--model", model, "--batch", "1", "--dtype", "fp16", "--limit", "300"]
    db = bz(*args)
    assert "\x1b[" not in db and "…" not in db
    recs = records_of(bz(*args, "--format", "json"), "db query")
    assert len(recs) > 100
    for r in recs:
        assert r["description"] in db and r["algorithm"] in db


# -------------------------------------------------------------------------- FitTable on its own

def _print(t, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(t)
    return buf.getvalue()


def _table() -> FitTable:
    t = FitTable("a title that is long enough to wrap in a narrow terminal: LBL 12.3456 ms",
                 [Col("#", "num"), Col("layer", "name"), Col("config", drop=2), Col("call", "name", drop=3),
                  Col("algorithm"), Col("µs", "num"), Col("IQR µs", "num", drop=1)])
    for i in range(12):
        t.add_row(str(i), f"/encoder/layers/encoder_layer_{i}/self_attention/out_proj/MatMul_{i}",
                  f"Gemm(m{i}x197 n768 k3072 NT +C)", "cublasLtMatmul+cublasLtMatmulAlgoGetHeuristic",
                  "lt:algo=21 tile=64x64 stages=32x5 splitK=16 red=compute", f"{1234.5 + i:.1f}", "0.1")
    return t


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_fit_table_keeps_numbers_and_name_ends(width):
    text = _print(_table(), width)
    lines = _fits(text, width)
    rows = _rows(lines)
    body = [r for r in rows if r[0].isdigit()]
    assert len(body) == 12  # one line per row: names are cut, never wrapped
    for i, r in enumerate(body):
        assert f"{1234.5 + i:.1f}" in r  # whole
        assert _same_name(r[1], f"/encoder/layers/encoder_layer_{i}/self_attention/out_proj/MatMul_{i}")
        assert r[1].endswith(f"MatMul_{i}" if width >= 80 else f"_{i}")  # the distinguishing end
        if width >= 200:
            assert "…" not in r[1]  # the columns dropped leave the names whole
    if width < 200:
        assert "call" not in text and "config" not in text  # dropped first
    else:
        assert "config" in text


def test_a_wide_console_shows_everything():
    text = _print(_table(), 100_000)
    assert "…" not in text and "encoder_layer_11/self_attention/out_proj/MatMul_11" in text
    assert "cublasLtMatmul+cublasLtMatmulAlgoGetHeuristic" in text and "IQR" in text


def test_cells_are_not_markup():
    t = FitTable("x", [Col("name", "name"), Col("ms", "num")])
    t.add_row("/block[red]/x[0]", "1.0")
    assert "/block[red]/x[0]" in _print(t, 80)


def test_middle_ellipsis_keeps_the_end():
    assert middle_ellipsis("/layer1/layer1.0/conv2/Conv", 20) == "/layer1/…/conv2/Conv"
    assert middle_ellipsis("/layer1/layer1.0/conv2/Conv", 40) == "/layer1/layer1.0/conv2/Conv"
    s = middle_ellipsis("resnet50_layer4_bottleneck_conv3", 16)
    assert len(s) == 16 and s.endswith("conv3") and s.startswith("res")
    for w in range(1, 30):
        assert cell_len(middle_ellipsis("/a/bb/ccc/dddd/eeeee/ffffff", w)) <= w


def test_times_have_units():
    assert fmt_ms(4.32e-05) == "0.043 µs"
    assert fmt_ms(0.0432) == "43.2 µs"
    assert fmt_ms(0.5) == "500 µs"
    assert fmt_ms(1.2345) == "1.23 ms"
    assert fmt_ms(123.4) == "123 ms"
    assert fmt_ms(None) == "-" and fmt_ms(float("nan")) == "-"


from test_insights import prof_dir  # noqa: E402,F401 - the framework profile fixture


@pytest.mark.parametrize("width", [80, 120])
def test_the_insights_tables_fit(models, prof_dir, tmp_path, width):  # noqa: F811
    """analyze --profile (summary, breakdown, findings, algorithm selection, what-if) and report."""
    args = ["analyze", models / "resnet50_bnkept.onnx", "--db", REF, "--profile", prof_dir]
    text = ANSI.sub("", bz(*args, columns=width))
    _fits(text, width)
    for title in ("where the measured latency goes", "findings, ranked", "algorithm selection"):
        assert title in " ".join(text.split())  # a title may wrap
    (tmp_path / "a.json").write_text(bz(*args, "--json"))
    _fits(bz("report", tmp_path / "a.json", tmp_path / "a.json", columns=width), width)


# ------------------------------------------------- issue "One pipeline, one answer", item 7 and item 4

TRUTH = REPO / "db" / "reference" / "h200_truth.sqlite.gz"


def _analysis(model, batch=32, dtype="fp16"):
    from benanza import api

    return api.lower_bound(api.Scenario.of(model, batch=batch, dtype=dtype), str(TRUTH)).analysis


@pytest.mark.parametrize("width", [80, 120, 100_000])
def test_the_fast_rows_are_richs_rows(models, width):
    """FitTable draws one-line rows itself (0.6 ms a row in rich): the same characters and colours as
    rich's Table, on a terminal and piped, with missing (red) rows and wrapped engine configs."""
    from benanza.reports.lbl import analysis_table as _analysis_table
    from benanza.reports.lbl_summary import lbl_summary_table as _summary_table

    for a in (_analysis(REPO / "examples" / "resnet50.onnx"), _analysis(models / "resnet50_bnkept.onnx")):
        for color in (False, True):
            outs = []
            for fast in (True, False):
                t = _analysis_table(a)
                t.fast = fast
                c = Console(file=io.StringIO(), width=width, force_terminal=color, no_color=not color,
                            color_system="truecolor" if color else None)
                c.print(t)
                c.print(_summary_table([a]))
                outs.append(c.file.getvalue())
            assert outs[0] == outs[1]


def test_an_empty_column_goes_first_and_engine_configs_wrap_between_knobs():
    """At 120 columns the all-empty v7 column (no heuristic records in this database) is not shown,
    math is; an engine config breaks after a knob's ``_``, never inside ``k28=1``."""
    from benanza.reports.lbl import analysis_table as _analysis_table

    a = _analysis(REPO / "examples" / "resnet50.onnx")
    c = Console(file=io.StringIO(), width=120)
    c.print(_analysis_table(a))
    text = c.file.getvalue()
    assert "pick" not in text and "math" in text and "tensor_op" in text
    c = Console(file=io.StringIO(), width=80)
    c.print(_analysis_table(a))
    lines = _fits(c.file.getvalue(), 80)
    algos = [r[2] for r in _rows(lines) if len(r) >= 3]
    pieces = {p for cell in algos for p in cell.split("_") if p}
    knobs = {p for t in a.layers for p in t.algorithm.split("_") if t.algorithm}
    assert pieces <= knobs | {""}  # every piece of a wrapped cell is a whole knob of some engine config


def test_token_wrap():
    from benanza.reports.tables import token_wrap

    assert token_wrap("eng41_k2=1_k13=0_k18=0", 12) == "eng41_k2=1_\nk13=0_k18=0"
    assert token_wrap("lt:algo=6 tile=128x128 stages=4x1", 14) == "lt:algo=6\ntile=128x128\nstages=4x1"
    assert token_wrap("short", 10) == "short"
    assert all(len(x) <= 4 for x in token_wrap("abcdefghij_k", 4).split("\n"))
