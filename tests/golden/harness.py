"""Run a golden case (tests/golden/cases.py) and render what it did as one stable text.

A case runs ``benanza`` through its public entry only: in this process through
``benanza.cli.main(argv)`` with stdout and stderr captured as bytes (the fast path the test takes),
or as a child ``python -m benanza`` (what a user runs: the recording, and the cases that need a
process of their own or a terminal). Both see the same environment (:func:`case_env`): COLUMNS=80,
no colour forcing, the reference databases unpacked into a cache folder shared by the session, the
default database under a temporary XDG_DATA_HOME, umask 022, the repository root as the working
folder (the cases name repository files by relative paths).

The record (:func:`render`) holds per step the command, its exit status, stdout and stderr, then each
file the case asked for (text, a manifest of a folder, or a PNG's size class), with the machine's
paths replaced by ``<TMP>``, ``<REPO>``, ``<CACHE>`` and ``<HOME>``.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import re
import shlex
import stat
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = HERE / "out"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: environment variables that change how rich/click render, or what benanza reads, removed for every case
SCRUB = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR", "CLICOLOR_FORCE",
         "BENANZA_DEBUG", "BENANZA_DB", "BENANZA_MODEL_CACHE", "BENANZA_EXPORT_CACHE", "BENANZA_SHARED",
         "JUPYTER_COLUMNS", "JUPYTER_LINES", "COLUMNS", "LINES", "PYTHONWARNINGS")


@dataclass(frozen=True)
class Step:
    """One ``benanza`` command of a case: ``argv`` (``{tmp}`` is the case's temporary folder);
    ``save``: a file under ``{tmp}`` that receives its stdout (recorded as its sha256 only, when
    ``record`` is False, e.g. a JSON document a later step reads)."""
    argv: tuple[str, ...]
    save: str | None = None
    record: bool = True


@dataclass(frozen=True)
class Case:
    """A named scenario: its steps, the files under ``{tmp}`` to record after them
    (``(relative path, "text" | "manifest" | "png" | "mode")``), extra environment, whether stdout is
    a terminal (``tty``: a child process on a pseudo-terminal of COLUMNS x LINES), whether it needs a
    process of its own (``child``), regex substitutions for what varies run to run (``normalize``:
    ``(pattern, replacement)``), the defect of issue 52 it records (``defect``) and a note."""
    name: str
    steps: tuple[Step, ...]
    files: tuple[tuple[str, str], ...] = ()
    env: dict = field(default_factory=dict)
    tty: bool = False
    child: bool = False
    normalize: tuple[tuple[str, str], ...] = ()
    defect: str = ""
    note: str = ""
    absent: tuple[str, ...] = ()  # modules this case's output assumes are not installed (else skipped)

    def skip_reason(self) -> str | None:
        """Why this case cannot run here (a module it assumes absent is installed), or None."""
        import importlib.util

        present = [m for m in self.absent if importlib.util.find_spec(m) is not None]
        return f"records the output without {', '.join(present)}, which is installed here" if present else None


def case(name: str, *argv: str, save: str | None = None, then=(), **kw) -> Case:
    """A case of one command (``then``: further argvs run after it, each recorded)."""
    steps = (Step(tuple(argv), save),) + tuple(s if isinstance(s, Step) else Step(tuple(s)) for s in then)
    return Case(name, steps, **kw)


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes


# ------------------------------------------------------------------------------------------- environment

def case_env(case: Case, tmp: Path, cache: Path) -> dict:
    """The environment overrides of a case (None removes the variable)."""
    env = {k: None for k in SCRUB}
    env.update(COLUMNS="80", LINES="24", TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8",
               XDG_CACHE_HOME=str(cache), XDG_DATA_HOME=str(tmp / ".data"), PYTHONHASHSEED="0")
    env.update(case.env)
    return env


def _argv(step: Step, tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in step.argv]


@contextlib.contextmanager
def _environment(over: dict):
    old = {k: os.environ.get(k) for k in over}
    try:
        for k, v in over.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -------------------------------------------------------------------------------------------- runners

def _bytes_stream() -> io.TextIOWrapper:
    # what a pipe gives python: UTF-8, not a terminal
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n", write_through=True)


def run_inprocess(step: Step, tmp: Path, env: dict) -> Result:
    """``benanza.cli.main(argv)`` here, its stdout and stderr captured as bytes."""
    argv = _argv(step, tmp)
    out, err = _bytes_stream(), _bytes_stream()
    old_out, old_err, old_cwd, old_argv = sys.stdout, sys.stderr, os.getcwd(), sys.argv
    sys.argv = ["benanza", *argv]  # what the console script sees (an NVBench export records sys.argv[1:])
    old_mask = os.umask(0o022)
    rc = 0
    with _environment(env):
        sys.stdout, sys.stderr = out, err
        os.chdir(REPO)
        try:
            from benanza.cli import main

            main(argv)
        except SystemExit as e:
            code = e.code
            if code is None:
                rc = 0
            elif isinstance(code, int):
                rc = code
            else:  # sys.exit("message"): python prints it and exits 1
                err.write(f"{code}\n")
                rc = 1
        except BaseException:  # what the interpreter would print for an uncaught exception
            err.write(traceback.format_exc())
            rc = 1
        finally:
            out.flush()
            err.flush()
            sys.stdout, sys.stderr, sys.argv = old_out, old_err, old_argv
            os.chdir(old_cwd)
            os.umask(old_mask)
    return Result(rc, out.buffer.getvalue(), err.buffer.getvalue())


def _child_env(env: dict) -> dict:
    full = dict(os.environ)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in full.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p and Path(p).resolve() != REPO])
    return full


def run_child(step: Step, tmp: Path, env: dict) -> Result:
    """``python -m benanza ARGV`` with stdout and stderr on pipes."""
    r = subprocess.run([sys.executable, "-m", "benanza", *_argv(step, tmp)], cwd=REPO, env=_child_env(env),
                       stdin=subprocess.DEVNULL, capture_output=True, preexec_fn=lambda: os.umask(0o022),
                       timeout=600)
    return Result(r.returncode, r.stdout, r.stderr)


def run_tty(step: Step, tmp: Path, env: dict) -> Result:
    """``python -m benanza ARGV`` with stdout on a pseudo-terminal of COLUMNS x LINES (stderr on a
    pipe); the terminal's CR LF read back as LF."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    cols, rows = int(env.get("COLUMNS") or 80), int(env.get("LINES") or 24)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "benanza", *_argv(step, tmp)], cwd=REPO, env=_child_env(env),
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                         preexec_fn=lambda: os.umask(0o022))
    os.close(slave)
    chunks, err_chunks = [], []
    fds = {master: chunks, p.stderr.fileno(): err_chunks}
    while fds:
        ready, _, _ = select.select(list(fds), [], [], 600)
        if not ready:
            p.kill()
            break
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other end closed
                data = b""
            if data:
                fds[fd].append(data)
            else:
                del fds[fd]
    rc = p.wait()
    os.close(master)
    p.stderr.close()
    return Result(rc, b"".join(chunks).replace(b"\r\n", b"\n"), b"".join(err_chunks))


def run_case(case: Case, tmp: Path, cache: Path, how: str = "inprocess") -> str:
    """Run every step of ``case`` (``how``: inprocess or child; a tty or child case always runs as a
    child) and return its rendered record."""
    env = case_env(case, tmp, cache)
    runner = run_tty if case.tty else run_child if (case.child or how == "child") else run_inprocess
    parts = [_header(case)]
    for step in case.steps:
        r = runner(step, tmp, env)
        if step.save:
            (tmp / step.save).write_bytes(r.stdout)
        parts.append(_render_step(step, r))
    for rel, mode in case.files:
        parts.append(_render_file(tmp / rel, rel, mode))
    return normalize("".join(parts), case, tmp, cache)


# ------------------------------------------------------------------------------------------- rendering

def _header(case: Case) -> str:
    lines = [f"# golden case {case.name}"]
    if case.env:
        lines.append("# env: " + " ".join(f"{k}={v}" for k, v in sorted(case.env.items())))
    lines.append("# stdout: " + ("a terminal" if case.tty else "a pipe"))
    if case.defect:
        lines.append(f"# records a defect of issue 52: {case.defect}")
    if case.note:
        lines.append(f"# note: {case.note}")
    return "\n".join(lines) + "\n"


def _block(title: str, data: bytes | str) -> str:
    text = data.decode("utf-8", errors="backslashreplace") if isinstance(data, bytes) else data
    text = text.replace("\x1b", "\\x1b")  # a terminal's escapes, visible in a diff
    if text and not text.endswith("\n"):
        text += "\n% no newline at end\n"
    return f"## {title}\n{text}"


def _render_step(step: Step, r: Result) -> str:
    cmd = "benanza " + " ".join(shlex.quote(a) for a in step.argv)
    s = f"\n$ {cmd}" + (f" > {{tmp}}/{step.save}" if step.save else "") + f"\n## exit {r.rc}\n"
    if step.save and not step.record:
        s += f"## stdout: {len(r.stdout)} bytes, sha256 {hashlib.sha256(r.stdout).hexdigest()}\n"
    else:
        s += _block("stdout", r.stdout)
    return s + _block("stderr", r.stderr)


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def _render_file(path: Path, rel: str, mode: str) -> str:
    head = f"\n## file {{tmp}}/{rel}"
    if not path.exists():
        return head + ": absent\n"
    if mode in ("manifest", "suite"):
        files = sorted(p for p in path.rglob("*") if p.is_file())
        skip = [p for p in files if mode == "suite" and p.relative_to(path).parts[0] == "harness"]
        rows = [f"{p.relative_to(path).as_posix()}  {p.stat().st_size}  "
                f"{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in files if p not in skip]
        if skip:  # the C++ harness copied into every suite: listed whole by one case only
            rows.append(f"harness/...  {len(skip)} files of the C++ harness, listed in generate-resnet50-fp16")
        return head + f" (folder: {len(files)} files; path, bytes, sha256)\n" + "".join(r + "\n" for r in rows)
    if mode == "png":
        data = path.read_bytes()
        size = len(data)
        klass = "empty" if size == 0 else "<10 KB" if size < 10_000 else "<100 KB" if size < 100_000 else ">=100 KB"
        sig = "valid signature" if data[:8] == PNG_SIGNATURE else "NOT A PNG"
        return head + f" (PNG: {sig}, size {klass}, mode {_mode(path)})\n"
    if mode == "mode":
        return head + f" (mode {_mode(path)}, {path.stat().st_size} bytes)\n"
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return head + f" (mode {_mode(path)})\n" + _block("content", data)


def normalize(text: str, case: Case, tmp: Path, cache: Path) -> str:
    """The machine's paths replaced by placeholders, then the case's own substitutions."""
    subs = [(str(tmp), "<TMP>"), (str(tmp.resolve()), "<TMP>"), (str(cache), "<CACHE>"),
            (str(cache.resolve()), "<CACHE>"), (str(REPO), "<REPO>"), (str(Path.home()), "<HOME>")]
    # an installed package (CI's `pip install .`) reads db/reference's tables from its own copy
    # (setup.py's benanza/_data): the same file, named as the source tree names it
    import benanza

    data = Path(benanza.__file__).resolve().parent / "_data"
    if data.is_dir():
        subs.append((str(data), str(REPO / "db" / "reference")))
    for old, new in sorted(set(subs), key=lambda s: -len(s[0])):
        if old and old != "/":
            text = text.replace(old, new)
    for pattern, repl in case.normalize:
        text = re.sub(pattern, _numbered() if repl == NUMBERED else repl, text)
    return text


#: a replacement that numbers each distinct match in order of first appearance, keeping the
#: pattern's groups: ``(id="|#)([mp])[0-9a-f]{10}`` makes random ids ``id="m<1>"``, ``#m<1>``, ``#p<2>``
NUMBERED = "<numbered>"


def _numbered():
    seen: dict[str, int] = {}

    def sub(m: re.Match) -> str:
        key = m.group(0)[len(m.group(1) or ""):]
        n = seen.setdefault(key, len(seen) + 1)
        return "".join(g or "" for g in m.groups()) + f"<{n}>"

    return sub


def out_path(name: str) -> Path:
    return OUT / f"{name}.txt"


def read_record(name: str) -> str | None:
    """The recording of ``name`` as written (a CSV's CR LF kept: no newline translation), or None."""
    p = out_path(name)
    return p.read_bytes().decode("utf-8") if p.exists() else None


def write_record(name: str, text: str) -> None:
    out_path(name).write_bytes(text.encode("utf-8"))


# ------------------------------------------------------------------------------------- whole cases

def warm_cache(cache: Path) -> None:
    """Unpack every reference database into ``cache`` once, before cases run side by side (two
    processes unpacking one database at once would race on its temporary file)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="golden-warm-") as t:
        warm = Case("warm", ())
        env = case_env(warm, Path(t), cache)
        for db in sorted((REPO / "db" / "reference").glob("*.sqlite.gz")):
            r = run_inprocess(Step(("db", "systems", "--db", str(db.relative_to(REPO)))), Path(t), env)
            if r.rc != 0:
                raise RuntimeError(f"db systems --db {db}: exit {r.rc}: {r.stderr.decode()}")


def run_named(name: str, cache: str, how: str = "inprocess") -> str:
    """The record of case ``name`` run in a fresh temporary folder (for a pool's workers)."""
    import shutil
    import tempfile

    from cases import BY_NAME

    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    try:
        return run_case(BY_NAME[name], tmp, Path(cache), how)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
