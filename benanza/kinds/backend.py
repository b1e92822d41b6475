"""The backend of an implementation: which runtime a measured call runs in, as one typed value.

A layer config is timed by two workers: the generated C++ suite (:data:`Backend.SUITE`: cuDNN, cuBLAS,
cuBLASLt and benanza's own harness kernels) and the framework's own kernels as PyTorch eager runs
them (:data:`Backend.TORCH_EAGER`, :mod:`benanza.profiles.torch_candidates`); :data:`Backend.TORCH_COMPILE`
is reserved for a torch.compile worker. Every stage reads the backend from this value: a measurement
row's ``backend`` column (``measurements.backend``, schema 7), a worker's record
(:class:`benanza.database.records.MeasurementLine`), a job id (:class:`benanza.kinds.base.JobId`) and
the analyses' layer times, never from the text of a call's name.

The names keep their historical spelling: a framework call is named ``<prefix><op>`` (PyTorch eager:
``torch:aten::conv2d``), a suite call by its library function (``cudnnConvolutionForward``), and a
framework job's id is its suite job's plus a suffix (``.torch``). This module is the one place that
knows those spellings (:attr:`Backend.call_prefix`, :attr:`Backend.job_suffix`): it renders names
(:meth:`Backend.call_name`) and maps what was written before the backend had a column of its own
(:meth:`Backend.of_call`: a record without a ``backend`` key, a row of a schema-6 database; the
migration db/migrations/versions/0007_backend.py backfills the column with the same rule).

Adding a backend (a torch.compile worker, another runtime): a member here with its name prefix and job
suffix, a worker whose records say it (``"backend": VALUE``), and a schema version
(``benanza.database.store.SCHEMA_VERSION``, a migration that changes no table) so that an older
benanza refuses a database that holds its rows.
"""
from __future__ import annotations

import enum


class Backend(str, enum.Enum):
    """Which runtime an implementation runs in; stored by its value (``suite``, ``torch_eager``,
    ``torch_compile``). ``str(b)`` is the value."""

    #: the generated C++ suite: cuDNN, cuBLAS / cuBLASLt and benanza's harness kernels
    SUITE = "suite"
    #: PyTorch eager: the ATen call PyTorch runs for the config (benanza.profiles.torch_candidates)
    TORCH_EAGER = "torch_eager"
    #: reserved: the kernels torch.compile generates for the config (no worker yet)
    TORCH_COMPILE = "torch_compile"

    def __str__(self) -> str:
        return self.value

    @property
    def framework(self) -> bool:
        """The framework's own kernels (any backend but the suite)."""
        return self is not Backend.SUITE

    @property
    def source(self) -> str:
        """``library`` (the suite) or ``framework``: the measurement sources of
        :class:`benanza.database.query.Serves`."""
        return "framework" if self.framework else "library"

    @property
    def call_prefix(self) -> str:
        """How this backend's call names begin ("" for the suite's library functions)."""
        return _CALL_PREFIX[self]

    @property
    def job_suffix(self) -> str:
        """The suffix of this backend's job ids after the suite job's id ("" for the suite)."""
        return _JOB_SUFFIX[self]

    def call_name(self, op: str) -> str:
        """The displayed name of this backend's call ``op`` (``aten::conv2d`` -> ``torch:aten::conv2d``)."""
        return self.call_prefix + op

    @classmethod
    def of_call(cls, call: str | None) -> "Backend":
        """The backend a call name was written by, for what carries no backend of its own (a worker's
        line without a ``backend`` key, a row of a schema-6 database): the framework backend whose
        :attr:`call_prefix` begins it, else the suite."""
        text = call or ""
        return next((b for b in _FRAMEWORKS if text.startswith(b.call_prefix)), cls.SUITE)

    @classmethod
    def of_job(cls, job: str | None) -> "Backend":
        """The backend of a job id (``KEY.PRECISION[.nhwc][.torch]``): the one whose
        :attr:`job_suffix` ends it, else the suite."""
        text = job or ""
        return next((b for b in _FRAMEWORKS if text.endswith(b.job_suffix)), cls.SUITE)

    @classmethod
    def of_source(cls, source: str) -> tuple["Backend", ...]:
        """The backends of a measurement source: ``library``, ``framework`` or ``all``. Raises
        ValueError for another name."""
        if source not in ("all", "library", "framework"):
            raise ValueError(f"unknown measurement source {source!r}")
        return tuple(b for b in cls if source == "all" or b.source == source)

    @classmethod
    def parse(cls, value: str) -> "Backend":
        """The backend of a stored value (``suite``, ``torch_eager``, ``torch_compile``). Raises
        ValueError naming the values for another."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown backend {value!r} (expected {', '.join(b.value for b in cls)})") from None


_CALL_PREFIX = {Backend.SUITE: "", Backend.TORCH_EAGER: "torch:", Backend.TORCH_COMPILE: "torch.compile:"}
_JOB_SUFFIX = {Backend.SUITE: "", Backend.TORCH_EAGER: ".torch", Backend.TORCH_COMPILE: ".compile"}
#: the backends with a name prefix and a job suffix of their own (every one but the suite)
_FRAMEWORKS = tuple(b for b in Backend if b.framework)
