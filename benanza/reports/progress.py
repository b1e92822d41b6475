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
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
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
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True)
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
    return console.status(what)
