"""Strings from a model or a database are data wherever they go (issue 53, items 7 and 8): on the
terminal they never drive it (no ESC, no other C0/C1 control character, no bidi override, no rich
markup or emoji codes), in SVG/XML and HTML they never make the document invalid or inject markup,
in CSV they round-trip and never start a spreadsheet formula, and in generated C++ they are escaped
string literals whose value is the string's UTF-8 bytes.

The property tests feed arbitrary Unicode (Hypothesis: every code point but surrogates, control
characters included) as a layer, node or system name through each writer; the end-to-end tests run
``benanza layers``, ``analyze``, ``roofline --svg``, ``db systems`` and a failing command on a model,
a file name and a database carrying terminal escapes (OSC 52 clipboard write, SGR colours, OSC
window title, screen clear), ``:fire:`` and ``[link=...]`` markup."""
import csv
import gzip
import html.parser
import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET

import onnx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from conftest import REPO

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"
RESNET18 = REPO / "tests" / "data" / "zoo" / "models" / "resnet18.onnx"

#: the hostile strings of the end-to-end tests
OSC52 = "\x1b]52;c;ZWNobwo=\x07"  # writes "echo" into the clipboard
SGR = "\x1b[31m"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
NAMES = [f"conv{OSC52}a", f"relu{SGR}red", "fire:fire:", "ctl\x01\x08\x0b\x7f\x9b\u202eevil", "[link=http://x]lnk[/link]"]

#: characters no terminal output may carry raw (a newline and a tab are printed deliberately)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: characters an XML 1.0 document cannot hold, even escaped (W3C XML 1.0, 2.2), and C1 (HTML parse errors)
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: hostile examples every property test runs besides Hypothesis's own
HOSTILE = (OSC52, SGR + "x" + TITLE, "a\x00b\x1fc\x7fd\x85e\x9bf", "\u202egnp.exe", "=HYPERLINK(\"http://x\")",
           "-2+3", "@SUM(A1)", "<script>alert(1)</script>", "\"'&<>", "??=??/", "a\\\"b", "名前 é :fire: 🔥", ":fire: [bold]b[/bold]",
           "$x$ $\\frac{1}{0}$", "\r\n\t", "")


def with_examples(f):
    for s in HOSTILE:
        f = example(s)(f)
    return f


# -------------------------------------------------------------------------------------- terminal

@FAST
@with_examples
@given(st.text())
def test_terminal_text_leaves_no_control_character(s):
    from benanza.reports.safe_text import terminal_text

    t = terminal_text(s)
    assert "\x1b" not in t and not RAW_CONTROL.search(t)
    assert terminal_text(t) == t  # idempotent
    if not RAW_CONTROL.search(s):
        assert t == s  # letters of any script, emoji, ``:fire:``, backslashes: unchanged


@FAST
@with_examples
@given(st.text())
def test_a_table_and_a_line_carry_no_control_character(s):
    """A name in a table cell, title and caption, and in a plain line, through the consoles every
    command prints on."""
    from benanza.reports.tables import Col, FitTable, console

    buf = io.StringIO()
    c = console(file=buf)
    t = FitTable(f"model {s}", [Col("#", "num"), Col("layer", "name"), Col("algorithm", "token")], caption=s)
    t.add_row("1", s, s)
    t.add_row("2", "conv", s)
    c.print(t)
    c.print(f"system: {s}")
    text = buf.getvalue()
    assert "\x1b" not in text and not RAW_CONTROL.search(text), ascii(text[:300])
    if "🔥" not in s:
        assert "🔥" not in text  # no emoji made from ``:fire:``


def test_the_error_line_prints_markup_and_emoji_codes_as_written(capsys):
    from benanza.cli.app import guarded
    from benanza.errors import UsageError

    @guarded
    def fails():
        raise UsageError(f"{CLEAR}:fire: [bold]x[/bold] {OSC52}")

    with pytest.raises(BaseException):
        fails()
    err = capsys.readouterr().err
    assert err == "benanza: \\x1b[2J:fire: [bold]x[/bold] \\x1b]52;c;ZWNobwo=\\x07\n"


# ------------------------------------------------------------------------------------- SVG / XML

@pytest.fixture(scope="module")
def small_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    sc = ax.scatter([1.0], [2.0])
    sc.set_gid("pts")
    yield fig, ax
    plt.close(fig)


@settings(FAST, max_examples=50)
@with_examples
@given(st.text(max_size=40))
def test_the_svg_writer_gives_valid_xml(small_figure, s):
    """A name in a point's tooltip (``add_svg_titles``) and in the chart's title (matplotlib's SVG):
    the document parses and the tooltip says the name (U+FFFD for what XML cannot hold)."""
    from benanza.reports.chart import add_svg_titles

    fig, ax = small_figure
    try:
        from benanza.reports.safe_text import mpl_text, xml_text
    except ImportError:  # before the fix: the name as it came
        mpl_text = xml_text = str  # noqa: E731
    ax.set_title(mpl_text(f"model {s}"))
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = add_svg_titles(buf.getvalue(), {"pts": [f"#0 {s}"]})
    root = ET.fromstring(svg)
    titles = [e.text for e in root.iter("{http://www.w3.org/2000/svg}title")]
    # (an XML parser reads a raw carriage return as a line end: XML 1.0, 2.11)
    assert titles == [f"#0 {xml_text(s)}".replace("\r\n", "\n").replace("\r", "\n")]


def _chart_model():
    """A real roofline (resnet18 batch 1 fp32 in the shipped H200 database), its layers renamed."""
    from benanza.api import Scenario, roofline

    return roofline(Scenario(RESNET18, 1), db=str(REF_DB)).roofline


def test_the_roofline_chart_of_hostile_names_is_valid_svg(tmp_path):
    """Item 8: a control character in a layer name (and in the model and GPU names, and a ``$``
    pair that matplotlib would read as mathtext) made the roofline SVG invalid XML."""
    import dataclasses

    from benanza.reports.chart import render

    mr = _chart_model()
    names = [*NAMES, "a$\\frac{1}{0}$b"]
    layers = [dataclasses.replace(x, name=names[i % len(names)] + "\x0c") for i, x in enumerate(mr.layers)]
    mr = dataclasses.replace(mr, model="m\x1b]0;t\x07$x", layers=layers,
                             gpu=dataclasses.replace(mr.gpu, name="H200\x00\x1f"))
    svg = tmp_path / "r.svg"
    assert render(mr, svg=svg) == [svg]
    root = ET.parse(svg).getroot()
    titles = [e.text for e in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any("relu\ufffd[31mred" in t for t in titles), titles[:3]


# ------------------------------------------------------------------------------------------ HTML

class _Strict(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts = 0
        self.data = []

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"

    def handle_data(self, data):
        self.data.append(data)


@pytest.fixture(scope="module")
def plain_doc(tmp_path_factory):
    """The report's document of a plain ``benanza analyze --json`` (no profile), as ``report`` reads it."""
    import json

    from benanza.reports.report import load_documents

    f = tmp_path_factory.mktemp("doc") / "a.json"
    f.write_text(json.dumps({"model": "m", "batch": 1, "precision": "fp32", "system": {"gpu_name": "g"},
                             "lbl_sequential_ms": 2.0, "lbl_parallel_ms": 1.5, "lbl_fused_sequential_ms": 1.8,
                             "lbl_fused_parallel_ms": 1.2}))
    (d,) = load_documents([f])
    return d


def _insights_doc(base: dict, s: str) -> dict:
    """``base`` with ``s`` in every name the page shows: model, GPU, notice, layer, algorithm,
    kernel, critical-path step."""
    from benanza.reports.report import PARTS

    d = dict(base, model=f"model {s}", gpu=s, notices=[f"notice {s}"], breakdown={k: 0.25 for k, _, _ in PARTS})
    d["layers"] = [{"index": 0, "name": f"layer {s}", "op": "Conv", "framework_ms": 1.0, "lbl_ms": 0.5,
                    "algorithm": f"algo {s}", "critical": True, "framework_kernels": [s], "status": "ok"}]
    d["critical_path"] = [{"index": 0, "name": f"layer {s}", "op": "Conv", "lbl_ms": 0.5}]
    return d


@settings(FAST, max_examples=40)  # the report's template is compiled on each render (0.1 s)
@with_examples
@given(st.text(max_size=40))
def test_the_html_report_escapes_every_name(plain_doc, s):
    import markupsafe

    from benanza.reports.report import render_html

    page = render_html(_insights_doc(plain_doc, s))
    assert not XML_FORBIDDEN.search(page), ascii(XML_FORBIDDEN.search(page).group())
    p = _Strict()
    p.feed(page)
    p.close()
    assert p.scripts == 1  # the report's own filter script; a name never opens one
    shown = XML_FORBIDDEN.sub("\ufffd", s)
    assert str(markupsafe.escape(f"layer {shown}")) in page
    assert f"layer {shown}" in "".join(p.data)  # the text a browser shows is the name


# ------------------------------------------------------------------------------------------- CSV

@FAST
@with_examples
@given(st.text())
def test_csv_round_trips_and_starts_no_formula(s):
    import contextlib

    from benanza.reports.db import emit

    buf = io.StringIO(newline="")
    with contextlib.redirect_stdout(buf):  # a pipe or a file: the cells as they are, formula-safe
        emit([{"layer": s, "algorithm": f"x{s}", "best_ms": 1.5, "lag": -2.5}], "csv", "t")
    out = buf.getvalue()
    rows = list(csv.reader(io.StringIO(out, newline="")))
    assert rows[0] == ["layer", "algorithm", "best_ms", "lag"]
    cell = rows[1][0]
    assert rows[1][1:] == [f"x{s}", "1.5", "-2.5"]  # numbers stay numbers
    if s.startswith(("=", "+", "-", "@", "\t", "\r")) and not _number(s):
        assert cell == "'" + s
    else:
        assert cell == s


def _number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


# ------------------------------------------------------------------------------------------- C++

def decode_cpp_literal(lit: str) -> bytes:
    """The bytes of a C++ narrow string literal as benanza writes it (a reader of the escapes
    ``\\\\``, ``\\"``, ``\\?``, ``\\'``, ``\\n``-style and octal ``\\ooo``); raises AssertionError for
    anything a literal must not hold: an unescaped quote or backslash, a character outside printable
    ASCII, a ``??`` trigraph."""
    assert lit[0] == '"' and lit[-1] == '"' and len(lit) >= 2
    body = lit[1:-1]
    assert "??" not in body, "a trigraph"
    simple = {"\\": b"\\", '"': b'"', "?": b"?", "'": b"'", "n": b"\n", "t": b"\t", "r": b"\r",
              "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}
    out, i = bytearray(), 0
    while i < len(body):
        ch = body[i]
        assert 0x20 <= ord(ch) < 0x7F, f"raw {ch!r} in a literal"
        assert ch != '"', "an unescaped quote ends the literal"
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()  # C: at most three digits
            out.append(int(digits, 8))
            i += 1 + len(digits)
        else:
            out += simple[nxt]
            i += 2
    return bytes(out)


@FAST
@with_examples
@given(st.text())
def test_a_cpp_literal_holds_exactly_the_utf8_bytes(s):
    from benanza.kinds.cpp import cpp_string

    assert decode_cpp_literal(cpp_string(s)) == s.encode("utf-8")


def test_a_file_names_undecodable_bytes_reach_cpp_as_those_bytes():
    """A model file named with bytes that are not UTF-8 (Python's surrogateescape: U+DC80..U+DCFF)
    was a UnicodeEncodeError, exit 70, in ``generate``."""
    from benanza.kinds.cpp import cpp_string

    name = os.fsdecode(b"model\xff\xfe.onnx")
    assert decode_cpp_literal(cpp_string(name)) == b"model\xff\xfe.onnx"


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on this machine to compile the literals")
def test_the_literals_compile_to_the_bytes(tmp_path):
    """A handful of hostile names through g++ (trigraphs on, C++17): the program prints each
    literal's bytes, which are the name's UTF-8 bytes."""
    from benanza.kinds.cpp import cpp_string

    names = [*NAMES, *HOSTILE, "\\", "a?\"?/b", "??(??)??<??>??'??!??-", "x\\\ny", "*/ /* //", "\x00end"]
    src = tmp_path / "lit.cpp"
    src.write_text("#include <cstdio>\nstatic const char* const kLits[] = {\n"
                   + ",\n".join(cpp_string(n) for n in names)
                   + "};\nstatic const unsigned long kLens[] = {"
                   + ",".join(f"sizeof({cpp_string(n)}) - 1" for n in names)
                   + "};\nint main() { for (unsigned i = 0; i < sizeof(kLens) / sizeof(kLens[0]); ++i) {"
                   "std::fwrite(kLits[i], 1, kLens[i], stdout); std::fputc(0x1e, stdout); } }\n")
    exe = tmp_path / "lit"
    subprocess.run(["g++", "-std=c++17", "-trigraphs", "-Wall", "-Werror", "-Wno-trigraphs", "-o", str(exe),
                    str(src)], check=True, capture_output=True)
    got = subprocess.run([str(exe)], capture_output=True, check=True).stdout.split(b"\x1e")[:-1]
    assert got == [n.encode("utf-8") for n in names]


# ----------------------------------------------------------------------------------- end to end

def bz(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, args)],
                          capture_output=True, env=dict(os.environ, COLUMNS="200"), timeout=600, cwd=cwd)


def assert_neutral(p):
    """No ESC, no other raw control character, no emoji made from ``:fire:``, no traceback."""
    for stream in (p.stdout, p.stderr):
        assert b"\x1b" not in stream, stream[:400]
        text = stream.decode("utf-8")
        assert not RAW_CONTROL.search(text), ascii(RAW_CONTROL.search(text).group())
        assert "🔥" not in text and "Traceback" not in text


def _tiny_model(path):
    """A Conv -> Relu -> Add graph built with onnx.helper, hostile node, tensor and graph names."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info(f"y{SGR}", TensorProto.FLOAT, [1, 4, 8, 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.1] * 108)
    nodes = [helper.make_node("Conv", ["x", "w"], [f"c{OSC52}"], name=NAMES[0], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [f"c{OSC52}"], ["r"], name=NAMES[1]),
             helper.make_node("Add", ["r", "r"], [f"y{SGR}"], name=NAMES[3] + NAMES[2])]
    g = helper.make_graph(nodes, f"graph{TITLE}", [x], [y], [w], doc_string=TITLE)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], doc_string=OSC52), str(path))
    return path


def test_layers_and_analyze_of_hostile_names(tmp_path):
    """Item 7: the names were printed raw (the clipboard write, the colour, the bidi override)."""
    model = _tiny_model(tmp_path / f"m{TITLE}:fire:.onnx")
    p = bz("layers", model, "--details")
    assert p.returncode == 0, p.stderr
    assert_neutral(p)
    out = p.stdout.decode()
    assert "conv\\x1b]52;c;ZWNobwo=\\x07a" in out and "relu\\x1b[31mred" in out and "\\u202eevil" in out
    assert "m\\x1b]0;pwned\\x07:fire:" in out  # the model's name, from its file name
    p = bz("analyze", model, "--db", REF_DB)  # nothing of it is in the database: the one-line error names it
    assert p.returncode == 2
    assert_neutral(p)
    assert p.stderr.decode().startswith("benanza: m\\x1b]0;pwned\\x07:fire: batch 1 fp32: no layer is measured")


def test_roofline_svg_of_a_measured_model_with_hostile_names(tmp_path):
    """Item 8 end to end: ``roofline --svg`` of resnet18 whose layers carry control characters
    wrote an SVG that no XML parser reads."""
    m = onnx.load(str(RESNET18), load_external_data=False)
    nodes = [n for n in m.graph.node if n.op_type in ("Conv", "Relu")]
    for n, name in zip(nodes, NAMES):
        n.name = name
    path = tmp_path / "r18.onnx"
    onnx.save(m, str(path))
    svg = tmp_path / "r.svg"
    p = bz("roofline", path, "--db", REF_DB, "--svg", svg)
    assert p.returncode == 0, p.stderr
    assert_neutral(p)
    assert "relu\\x1b[31mred" in p.stdout.decode()  # the roofline table's layer column
    titles = [e.text for e in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("#1 relu\ufffd[31mred") for t in titles), titles[:3]


def test_an_error_line_naming_a_hostile_file(tmp_path):
    """Item 7: rich turned ``:fire:`` in a file name into an emoji and printed the screen clear raw."""
    p = bz("layers", tmp_path / f"x:fire:{CLEAR}y.onnx")
    assert p.returncode == 2
    assert_neutral(p)
    assert p.stderr.decode() == f"benanza: {tmp_path}/x:fire:\\x1b[2Jy.onnx: no such file\n"


def test_database_strings_are_neutralised(tmp_path):
    """A shared database's system name, driver and GPU name are data: ``db systems`` and ``analyze``
    printed them raw."""
    db = tmp_path / "h.db"
    with gzip.open(REF_DB) as f, open(db, "wb") as g:
        shutil.copyfileobj(f, g)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE systems SET gpu_name = ?, driver_version = ?",
                  (f"NVIDIA H200{TITLE}:fire:", f"580{OSC52}\u202e"))
    p = bz("db", "systems", "--db", db)
    assert p.returncode == 0, p.stderr
    assert_neutral(p)
    assert "NVIDIA H200\\x1b]0;pwned\\x07:fire:" in p.stdout.decode()
    p = bz("analyze", RESNET18, "--db", db)
    assert p.returncode == 0, p.stderr
    assert_neutral(p)
