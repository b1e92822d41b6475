"""A path the user gave that cannot be used is a one-line usage error (exit 2), before any work: it
was "internal error: IsADirectoryError" with exit 70, after the roofline table was computed."""
import subprocess
import sys

from conftest import REPO

MODEL = REPO / "tests" / "data" / "zoo" / "models" / "resnet18.onnx"
REF = REPO / "db" / "reference" / "h200.sqlite.gz"


def bz(*a):
    return subprocess.run([sys.executable, "-m", "benanza", *a], capture_output=True, text=True)


def _one_line_usage(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benanza: ") and "internal error" not in lines[0]
    assert all(w in lines[0] for w in words), lines[0]


def test_roofline_chart_into_a_folder(tmp_path):
    _one_line_usage(bz("roofline", str(MODEL), "--batch", "1", "--db", str(REF), "--png", str(tmp_path)),
                    "--png", "is a folder")
    _one_line_usage(bz("roofline", str(MODEL), "--batch", "1", "--db", str(REF), "--svg",
                       str(tmp_path / "nope" / "r.svg")), "does not exist")


def test_generate_into_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_usage(bz("generate", str(MODEL), "--batch", "1", "-o", str(f)), "not a folder")
    assert f.read_text() == "x"


def test_usage_errors_are_one_line_and_exit_2():
    """typer printed a box over several lines."""
    for args, words in ((["analyze"], ["Missing argument"]), (["analyze", "x.onnx", "--nope"], ["--nope"]),
                        (["db", "query", "--limit", "abc"], ["--limit"]), (["nocmd"], ["nocmd"])):
        _one_line_usage(bz(*args), *words)
    r = bz("--help")
    assert r.returncode == 0 and "Usage" in r.stdout


def _commands():
    """(path, click command) of every command of the benanza command tree."""
    import typer.main

    from benanza.cli import app

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, c in subs.items():
                yield from walk(c, path + [name])
        else:
            yield path, cmd

    return list(walk(typer.main.get_command(app), []))


def test_every_command_help_has_an_example():
    missing = [" ".join(p) for p, c in _commands() if "Example:" not in (c.help or "")]
    assert not missing, missing


def test_every_option_says_what_it_does():
    """Every option of every command has a help text, and --help shows a flag as a flag: typer's
    rich help printed `<bool>` after each (and after --help itself) and boxed the options so that
    at 80 columns the help column was a few words wide."""
    from typer.testing import CliRunner

    from benanza.cli import app

    runner = CliRunner()
    silent, placeholders, wide = [], [], []
    for path, cmd in _commands():
        silent += [f"{' '.join(path)} {p.opts[0]}" for p in cmd.params
                   if p.param_type_name == "option" and not p.hidden and not (p.help or "").strip()]
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="benanza")
        assert r.exit_code == 0, r.output
        assert "Example:" in r.output and "Options:" in r.output
        if "<bool>" in r.output:
            placeholders.append(" ".join(path))
        wide += [ln for ln in r.output.splitlines() if len(ln) > 80]
        for p in cmd.params:  # each option is listed with its help
            if p.param_type_name == "option" and not p.hidden:
                assert p.opts[0] in r.output, (path, p.opts[0])
    assert len(_commands()) >= 20
    assert not silent, silent
    assert not placeholders, placeholders
    assert not wide, wide[:3]
