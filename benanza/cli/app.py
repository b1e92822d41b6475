"""The ``benanza`` command line's frame (typer): the apps, the one-line failures, the entry point.

Every failure the user can cause prints one line ``benanza: <what and where>`` on stderr and exits
non-zero (codes in :mod:`benanza.errors`); no traceback unless ``BENANZA_DEBUG=1``.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from benanza import __version__
from benanza.errors import BenanzaError, UsageError, no_space
from benanza.reports.progress import Steps, TerminalProgress
from benanza.reports.terminal import err, error_line, out

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help="benanza: how fast could this ONNX model run on this GPU, and what stands in the way.")


db_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                     help="Query the performance database.")
app.add_typer(db_app, name="db")


#: the exit codes of the failures whose line was printed (:func:`_fail`), for :func:`main`
_PRINTED: list[int] = []

#: the commands whose finished jobs stay in the database when Ctrl-C stops them
RESUMABLE = ("run", "bench")


def _fail(msg: str, code: int) -> None:
    error_line(msg)
    _PRINTED.append(code)
    raise typer.Exit(code)


def guarded(fn):
    """Turn BenanzaError, Ctrl-C and unexpected errors into one line and an exit code; a SQLite file
    the failed command created and left empty is removed (:func:`benanza.database.store.discard_fresh`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from benanza.database.store import fresh_mark

        mark = fresh_mark()
        try:
            return fn(*args, **kwargs)
        except typer.Exit as e:
            if e.exit_code:
                _discard_fresh(mark)
            raise
        except BaseException:
            _discard_fresh(mark)
            return _guarded_failure(fn.__name__ in RESUMABLE)

    return wrapper


def _discard_fresh(mark: int) -> None:
    try:
        from benanza.database.store import discard_fresh

        discard_fresh(mark)
    except Exception:  # noqa: BLE001 - cleaning up must not hide the failure
        pass


def _guarded_failure(resumable: bool = False):
    """The one line and exit code of the exception being handled; ``resumable``: a command whose
    finished jobs a Ctrl-C keeps (:data:`RESUMABLE`), which its line says."""
    try:
        raise
    except typer.Exit:
        raise
    except BenanzaError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted; every finished job is in the database, run again to resume" if resumable
              else "interrupted", 130)
    except (IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError) as e:
        # a path the user gave that cannot be written or read as asked: a usage error
        _fail(f"{e.filename}: {e.strerror.lower() if e.strerror else type(e).__name__}", 2)
    except OSError as e:  # a full disk, a read-only file system, an I/O error: the system's words
        if e.errno is None or os.environ.get("BENANZA_DEBUG"):
            _internal_error(e)
        if no_space(e):
            _fail(no_space(e), 1)
        where = f"{e.filename}: " if e.filename else ""
        _fail(f"{where}{(e.strerror or os.strerror(e.errno)).lower()}", 1)
    except Exception as e:  # never a traceback for the user
        _internal_error(e)


def _internal_error(e: BaseException):
    """Exit 70 with one line for an exception benanza did not expect (the traceback with
    BENANZA_DEBUG=1)."""
    if os.environ.get("BENANZA_DEBUG"):
        raise e
    _fail(f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
          f"(set BENANZA_DEBUG=1 for the traceback)", 70)


def check_output_file(flag: str, path: Optional[Path]) -> None:
    """A file the command will write: refused before any work when it is a folder or its folder is
    missing (a chart written last must not cost the table)."""
    if path is None:
        return
    if path.is_dir():
        name = {"--png": "roofline.png", "--svg": "roofline.svg", "--trace": "lbl.json"}.get(flag, "export.json")
        raise UsageError(f"{flag} {path}: is a folder; give a file name, e.g. {path / name}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {path.parent} does not exist")


@app.callback(invoke_without_command=True)
def _root(version: bool = typer.Option(False, "--version", help="print the version")):
    if version:
        out.print(f"benanza {__version__}")
        raise typer.Exit(0)


#: seconds a Ctrl-C leaves the command to end on its own (rolling back, removing what it made)
INTERRUPT_GRACE_S = 3.0


def _stop_on_ctrl_c() -> None:
    """Ctrl-C (SIGINT) always stops the process within :data:`INTERRUPT_GRACE_S` seconds: it raises
    KeyboardInterrupt as Python does (the command rolls back, closes its databases and says
    ``interrupted``). Python drops a KeyboardInterrupt raised inside a finalizer or a weakref callback
    ("Exception ignored in"; SQLAlchemy returns a connection to its pool in one): the interrupt is then
    raised again in the main thread (``_thread.interrupt_main``) once the finalizer has returned, so that the command still unwinds and a SQLite database still closes its -wal and -shm
    files. Should the command not end by the time the grace period, counted from the first Ctrl-C, is
    up, the process exits 130 with that line; a database transaction left open is rolled back by the
    database (SQLite at the next open). The dropped interrupt's traceback is not printed."""
    import _thread
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def exit_now():
        try:
            err.print("benanza: interrupted", markup=False, highlight=False)
        finally:
            os._exit(130)

    timer: list[threading.Timer] = []

    def on_sigint(signum, frame):
        if not timer:  # the grace period runs from the user's Ctrl-C, not from a re-raised one
            timer.append(threading.Timer(INTERRUPT_GRACE_S, exit_now))
            timer[0].daemon = True
            timer[0].start()
        raise KeyboardInterrupt

    hook = sys.unraisablehook

    def unraisable(u):
        if not isinstance(u.exc_value, KeyboardInterrupt):
            hook(u)
            return
        # dropped by a finalizer: raised again once the finalizer has returned, from a timer thread (a
        # signal handler run inside this hook would be dropped too; one that lands in a finalizer again
        # comes back here)
        again = threading.Timer(0.05, _thread.interrupt_main, args=(signal.SIGINT,))
        again.daemon = True
        again.start()

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = unraisable


def main(argv: list[str] | None = None) -> None:
    """The console entry point. Usage errors (a missing argument, an unknown option, a bad value)
    are one line ``benanza: ...`` and exit 2, not the boxed message of typer's click. SQLAlchemy's
    log (a connection whose closing a Ctrl-C interrupted, logged with its traceback) is not printed:
    the failure is the one line. A Ctrl-C at any point, while typer builds the command or click
    parses its options too, is the one line ``benanza: interrupted`` and exit 130."""
    import logging

    logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())
    _stop_on_ctrl_c()
    try:
        rc = app(args=argv, prog_name="benanza", standalone_mode=False)
    except KeyboardInterrupt:  # a Ctrl-C while typer builds the command, before click's own handling
        error_line("interrupted")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - click's exceptions (typer vendors its own click)
        kinds = {c.__name__ for c in type(e).__mro__}
        if "NoArgsIsHelpError" in kinds:  # a bare `benanza` (or `benanza db`): its help, as click prints it
            e.show()
            sys.exit(e.exit_code)
        if "UsageError" in kinds and hasattr(e, "format_message"):
            ctx = getattr(e, "ctx", None)
            path = ctx.command_path if ctx is not None else "benanza"
            error_line(f"{path}: {' '.join(e.format_message().split())} (see `{path} --help`)")
            sys.exit(2)
        if "Abort" in kinds:
            error_line("interrupted")
            sys.exit(130)
        if "ClickException" in kinds and hasattr(e, "format_message"):
            error_line(' '.join(e.format_message().split()))
            sys.exit(getattr(e, "exit_code", 1))
        raise
    if rc == 130 and 130 not in _PRINTED:  # typer's Exit(130) for a Ctrl-C while click parses the options
        error_line("interrupted")
    sys.exit(rc if isinstance(rc, int) else 0)


def progress(quiet: bool = False, say=None) -> TerminalProgress:
    """The use cases' progress on stderr (:class:`benanza.reports.progress.TerminalProgress`)."""
    return TerminalProgress(err, quiet, say)


def steps(quiet: bool = False) -> Steps:
    """Each step's line on stderr, and a spinner on a terminal (``profile``, ``torch``)."""
    return Steps(err, quiet=quiet)
