"""Progress on the terminal (rich) for the long steps: compiling a suite, profiling a model,
importing a database. Each is drawn only on a terminal; on a pipe, with ``--quiet`` or ``--json``
nothing is drawn (the step lines of :class:`Steps` still print unless quiet).
"""
from __future__ import annotations

import contextlib
import re
import threading

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn,
                           TimeElapsedColumn)

#: ninja's status line: ``[12/40] Building CUDA object ...``
NINJA_STATUS = re.compile(r"^\[(\d+)/(\d+)\]")
#: make's (CMake's Makefile generator): ``[ 45%] Building CXX object ...``
MAKE_STATUS = re.compile(r"^\[\s*(\d+)%\]")


def build_status(line: str) -> tuple[int, int] | None:
    """(done, total) of a build tool's status line: ninja's ``[n/m]`` or make's ``[ p%]`` (out
    of 100); None for any other line."""
    m = NINJA_STATUS.match(line)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = MAKE_STATUS.match(line)
    if m:
        return int(m.group(1)), 100
    return None


class BuildProgress:
    """A bar per build (the cached harness library, the suite) fed with the build's output lines:
    ``progress(stage, line)`` where ``stage`` is e.g. ``"suite compile"`` (the ``progress``
    callback of :func:`benanza.build.builder.build`). Use as a context manager; inert unless
    ``enabled`` and ``console`` is a terminal. Safe to call from the two build threads."""

    def __init__(self, console: Console, enabled: bool = True):
        self.enabled = enabled and console.is_terminal
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True) if self.enabled else None
        self.tasks: dict[str, TaskID] = {}
        self.lock = threading.Lock()

    def __enter__(self) -> "BuildProgress":
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, stage: str, line: str) -> None:
        if self.bar is None:
            return
        what, _, step = stage.partition(" ")
        with self.lock:
            task = self.tasks.get(what)
            if task is None:
                task = self.tasks[what] = self.bar.add_task(f"{what}: {step or 'build'}", total=None)
        status = build_status(line)
        desc = f"{what}: {'configuring' if step == 'configure' else 'compiling'}"
        if status is None:
            self.bar.update(task, description=desc)
        else:
            self.bar.update(task, description=desc, completed=status[0], total=status[1])


class Steps:
    """The ``say`` of a multi-step command (profile, torch): each step's line on ``console`` and,
    on a terminal, a spinner with that step's elapsed time until the next step. A step starting
    with ``bench:`` runs a child ``benanza bench`` that draws its own progress: the spinner is
    paused until the next step. ``quiet``: nothing at all."""

    def __init__(self, console: Console, quiet: bool = False):
        self.console = console
        self.quiet = quiet
        self.bar = None if quiet or not console.is_terminal else Progress(
            SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(), console=console, transient=True)
        self.task: TaskID | None = None

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        self.console.print(msg, markup=False, highlight=False)
        if self.bar is None:
            return
        if self.task is not None:
            self.bar.remove_task(self.task)
            self.task = None
        if msg.startswith("bench:"):
            self.bar.stop()
            return
        self.task = self.bar.add_task(msg.split(":")[0], total=None)
        self.bar.start()

    def __enter__(self) -> "Steps":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def spinner(console: Console, what: str, enabled: bool = True):
    """A spinner with ``what`` while the block runs (a context manager), on a terminal when
    ``enabled``; else nothing."""
    if not enabled or not console.is_terminal:
        return contextlib.nullcontext()
    from rich.text import Text

    return console.status(Text(what))  # a Text: a name in ``what`` is never read as markup


class JobBar:
    """A rich progress bar over jobs: counts, ETA, failures so far; on a terminal only (a pipe or a
    log gets the run's summary line). The ``progress`` of :func:`benanza.runner.run.run_suite`."""

    def __init__(self, console: Console, quiet: bool, label: str = "measuring"):
        self.console = console
        self.quiet = quiet or not console.is_terminal
        self.label = label
        self.bar = None  # a rich Progress while jobs run
        self.task = None

    def __call__(self, event: str, info: dict) -> None:
        if self.quiet:
            return
        if event == "start":
            from rich.progress import TimeRemainingColumn

            self.bar = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("jobs  failed {task.fields[failed]}"), TimeElapsedColumn(),
                                TextColumn("eta"), TimeRemainingColumn(), console=self.console, transient=False)
            self.bar.start()
            self.task = self.bar.add_task("jobs", total=info["total"], failed=0)
        elif event == "job" and self.bar is not None:
            self.bar.update(self.task, completed=info["done"], failed=info["failed"])
        elif event == "end":
            self.close()

    def close(self):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class TerminalProgress:
    """The CLI's :class:`benanza.usecases.progress.Progress`: stage lines through ``say`` (a
    callable, e.g. :class:`Steps`; None: plain lines on ``console`` unless ``quiet``), ``notice:``
    lines and bars on ``console`` (stderr) unless ``quiet``."""

    def __init__(self, console: Console, quiet: bool = False, say=None):
        self.console = console
        self.quiet = quiet
        self._say = say

    def say(self, line: str) -> None:
        if self._say is not None:
            self._say(line)
        elif not self.quiet:
            self.console.print(line, markup=False, highlight=False)

    def notice(self, line: str) -> None:
        if not self.quiet:
            self.console.print(f"notice: {line}", markup=False, soft_wrap=True)

    def jobs(self, label: str, quiet: bool) -> JobBar:
        return JobBar(self.console, quiet or self.quiet, label)

    def build(self, quiet: bool) -> BuildProgress:
        return BuildProgress(self.console, enabled=not (quiet or self.quiet))
