"""Progress on the terminal (issue 17): compiling shows ninja's [n/m] as a bar, profiling a spinner
per step, importing a spinner; nothing is drawn on a pipe or with --quiet/--json."""
import io
import os
import re
import subprocess
import sys

from rich.console import Console

from benanza.reports.progress import BuildProgress, Steps, build_status, spinner

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100, color_system=None), buf


def test_build_status_lines():
    assert build_status("[12/40] Building CUDA object CMakeFiles/x.dir/conv_3.cu.o") == (12, 40)
    assert build_status("[ 45%] Building CXX object CMakeFiles/x.dir/a.cpp.o") == (45, 100)
    assert build_status("-- Configuring done (0.4s)") is None
    assert build_status("warning: [12/40] inside a line") is None


def test_build_progress_follows_ninja():
    con, _ = _terminal()
    with BuildProgress(con) as p:
        p("suite configure", "-- Configuring done (0.4s)\n")
        for i in range(1, 8):
            p("suite compile", f"[{i}/7] Building CUDA object conv_{i}.cu.o\n")
        p("harness compile", "[3/10] Building CXX object harness.cpp.o\n")
        tasks = {t.description: t for t in p.bar.tasks}
        assert tasks["suite: compiling"].completed == 7 and tasks["suite: compiling"].total == 7
        assert tasks["harness: compiling"].completed == 3 and tasks["harness: compiling"].total == 10
    assert not p.bar.live.is_started


def test_no_bar_on_a_pipe_or_when_quiet():
    pipe = Console(file=io.StringIO(), width=100)
    assert BuildProgress(pipe).bar is None and Steps(pipe).bar is None
    con, buf = _terminal()
    assert BuildProgress(con, enabled=False).bar is None
    with Steps(con, quiet=True) as say:
        say("timed run: 20 warm-up")
    assert buf.getvalue() == ""
    with spinner(pipe, "importing"):
        pass
    assert pipe.file.getvalue() == ""


def test_steps_print_each_step_and_pause_for_the_bench_child():
    con, buf = _terminal()
    with Steps(con) as say:
        say("export: resnet50 to x.onnx")
        assert say.bar.live.is_started
        say("bench: x.onnx --batch 1")  # the child draws its own progress on the terminal
        assert not say.bar.live.is_started
        say("timed run: 20 warm-up, 100 timed")
        assert say.bar.live.is_started and [t.description for t in say.bar.tasks] == ["timed run"]
    assert not say.bar.live.is_started
    text = ANSI.sub("", buf.getvalue())
    for line in ("export: resnet50 to x.onnx", "bench: x.onnx --batch 1", "timed run: 20 warm-up, 100 timed"):
        assert line in text


def _bz(*args, tty: bool):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR")}
    if tty:
        env.update(TTY_COMPATIBLE="1", COLUMNS="100")
    p = subprocess.run([sys.executable, "-m", "benanza", *map(str, args)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p


def test_build_draws_ninja_progress_on_a_terminal_only(models, tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    suite = tmp_path / "suite"
    _bz("generate", models / "resnet18.onnx", "--batch", "1", "--kinds", "Activation", "-o", suite, tty=False)
    p = _bz("build", suite, tty=True)
    err = ANSI.sub("", p.stderr)
    assert "suite: compiling" in err and re.search(r"\b(\d+)/\1\b", err), err[-2000:]  # the bar reached m/m
    assert p.stdout.startswith("built ")
    (suite / "build" / "benanza-suite").unlink()  # relink: a short build
    for p in (_bz("build", suite, tty=False), _bz("build", suite, "-q", tty=True)):
        assert "compiling" not in p.stderr and p.stdout.startswith("built ")


def test_the_run_bar_is_drawn_on_a_terminal_only(fake_suite, tmp_path):
    tty = _bz("run", fake_suite, "--db", tmp_path / "a.db", "--no-torch", tty=True)
    assert "measuring" in ANSI.sub("", tty.stderr) and "jobs run" in tty.stdout
    piped = _bz("run", fake_suite, "--db", tmp_path / "b.db", "--no-torch", tty=False)
    assert "measuring" not in piped.stderr and "jobs run" in piped.stdout  # the summary line, no bar
