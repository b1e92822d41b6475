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
