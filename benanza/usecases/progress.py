"""How a use case reports progress without printing: the :class:`Progress` protocol.

The CLI implements it on the terminal (:class:`benanza.reports.progress.TerminalProgress`: stage lines,
``notice:`` lines, rich bars); the Python API passes :data:`SILENT` (nothing; the notices are in the
results)."""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Protocol


class JobProgress(Protocol):
    """A job bar: called with ``("start", {"total": N})``, ``("job", {"done": n, "failed": f})`` and
    ``("end", {})`` (:func:`benanza.runner.run.run_suite`'s ``progress``); ``close()`` ends it."""

    def __call__(self, event: str, info: dict) -> None: ...

    def close(self) -> None: ...


class Progress(Protocol):
    """What a use case says while it works: ``say`` a stage line (``[1/5] ...``), ``notice`` a
    notice (without the ``notice:`` prefix), ``jobs(label, quiet)`` a job bar, and ``build(quiet)`` a
    context manager giving the ``progress(stage, line)`` callback of
    :func:`benanza.build.builder.build` (None: no bar)."""

    def say(self, line: str) -> None: ...

    def notice(self, line: str) -> None: ...

    def jobs(self, label: str, quiet: bool) -> JobProgress: ...

    def build(self, quiet: bool) -> ContextManager[Callable[[str, str], None] | None]: ...


class _NoJobs:
    def __call__(self, event: str, info: dict) -> None:
        pass

    def close(self) -> None:
        pass


class Silent:
    """A :class:`Progress` that says nothing (the Python API's)."""

    def say(self, line: str) -> None:
        pass

    def notice(self, line: str) -> None:
        pass

    def jobs(self, label: str, quiet: bool) -> JobProgress:
        return _NoJobs()

    def build(self, quiet: bool):
        return contextlib.nullcontext(None)


#: the progress of a caller that wants none
SILENT = Silent()
