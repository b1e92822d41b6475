"""Errors that reach the user as one line (the CLI prints ``benanza: <message>`` and exits non-zero)."""


class BenanzaError(Exception):
    """Base class: a user-facing failure with a one-line message that says what and where."""

    exit_code = 1


class ModelError(BenanzaError):
    """The ONNX model cannot be read, bound to a batch size or inferred (bad or unsupported input)."""

    exit_code = 2


class UsageError(BenanzaError):
    """A command-line value is invalid (batch size <= 0, unknown data type, ...)."""

    exit_code = 2


class DatabaseError(BenanzaError):
    """The performance database cannot be opened, created or written."""

    exit_code = 3


class LibraryError(BenanzaError):
    """cuDNN, cuBLAS or the CUDA toolkit cannot be found."""

    exit_code = 4


class BuildError(BenanzaError):
    """The generated benchmark suite failed to configure or compile."""

    exit_code = 5


class DeviceError(BenanzaError):
    """No usable CUDA device, or the benchmark suite cannot start on it."""

    exit_code = 6


class ProfileError(BenanzaError):
    """A framework profile (Chrome trace, cuDNN or cuBLASLt log, profile.json) cannot be read:
    truncated, malformed or from an unknown format; the message names the file and line."""

    exit_code = 2


def missing_file_reason(path) -> str | None:
    """Why ``path`` cannot be read as a file, in the words every command uses (``no such file``, ``a
    symbolic link loop, not a file``, ``a symbolic link to X, which does not exist``, ``not a file``);
    None when it is a readable path to a file. Raises nothing."""
    import errno
    import os
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        if p.is_symlink():
            try:
                p.resolve(strict=True)
            except (RuntimeError, OSError) as e:  # ELOOP (RuntimeError before Python 3.13)
                if isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP:
                    return "a symbolic link loop, not a file"
            try:
                return f"a symbolic link to {os.readlink(p)}, which does not exist"
            except OSError:
                return "a symbolic link that cannot be read"
        return "no such file"
    if not p.is_file():
        return "not a file"
    return None


def no_space(e: BaseException, where=None) -> str | None:
    """The one line (without ``benanza: ``) of a full disk or quota: ``<path>: no space left on device
    (<errno name>; nothing was written)`` for an OSError of errno ENOSPC or EDQUOT (``where``: the
    path to name, else the error's file name); None for any other error. Raises nothing."""
    import errno

    if not isinstance(e, OSError) or e.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    path = where or e.filename
    why = "ENOSPC" if e.errno == errno.ENOSPC else "EDQUOT, disk quota exceeded"
    return f"{path + ': ' if path else ''}no space left on device ({why}; nothing was written)"
