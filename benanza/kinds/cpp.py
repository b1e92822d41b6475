"""C++ literals for the generated suites: escaped strings (a model's names are untrusted), arrays,
numbers and the ``JobInfo`` initializer of a case."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from benanza.kinds.base import Job
from benanza.kinds.precision import PRECISION_ENUM


def cpp_string(text: str) -> str:
    """Escape ``text`` as a C++ string literal (with quotes).

    Printable ASCII passes except ``\\``, ``"`` and ``?`` (no trigraphs); everything else,
    including newlines and every byte of non-ASCII UTF-8, becomes a 3-digit octal escape, so no
    input can end the literal, start a comment or splice a line. A file name's undecodable bytes
    (lone surrogates U+DC80..U+DCFF, Python's ``surrogateescape``) are written as those bytes; other
    lone surrogates as their UTF-8-style three bytes (``surrogatepass``). Raises nothing.
    """
    out = ['"']
    try:
        data = str(text).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = str(text).encode("utf-8", "surrogatepass")
    for byte in data:
        ch = chr(byte)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def c_array(values, size: int | None = None, fill: int = 0) -> str:
    """C initializer ``{a, b, c}`` of ints/floats, padded with ``fill`` to ``size``."""
    vals = list(values)
    if size is not None:
        if len(vals) > size:
            raise ValueError(f"{len(vals)} values do not fit an array of {size}")
        vals = vals + [fill] * (size - len(vals))
    return "{" + ", ".join(cpp_num(v) for v in vals) + "}"


def cpp_num(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"non-finite constant {v}")
    return repr(f)


def job_init(job: Job) -> str:
    return ("{" + ", ".join([cpp_string(job.id), cpp_string(job.layer_key), cpp_string(job.kind),
                             cpp_string(job.node), PRECISION_ENUM[job.precision],
                             cpp_string(job.layout)]) + "}")


def as4(shape) -> list[int]:
    """A packed tensor viewed with at most 4 dims, keeping dims 0 and 1 (N and C)."""
    s = list(shape)
    if len(s) <= 4:
        return s + [1] * (4 - len(s))
    return s[:2] + [math.prod(s[2:]), 1]


ELEM_ENUM = {"float32": "ElemType::F32", "float16": "ElemType::F16", "bfloat16": "ElemType::BF16",
              "float64": "ElemType::F64", "int64": "ElemType::I64", "int32": "ElemType::I32",
              "int8": "ElemType::I8", "uint8": "ElemType::U8", "bool": "ElemType::I8", "int16": "ElemType::I16",
              "uint16": "ElemType::U16", "uint32": "ElemType::U32", "uint64": "ElemType::U64"}


#: a C++ literal of a case field: the text of an initializer, or a number Jinja prints as one
CppValue = str | int | float


@dataclass(frozen=True)
class Case:
    """One row of a template's case table (a generated suite's ``kCases``): subclasses list the fields
    of the template's C++ case struct in order, each a C++ literal; ``job`` is the ``JobInfo``
    initializer (:func:`job_init`)."""

    job: str

    def fields(self) -> list[str]:
        """The field names, in the C++ struct's order."""
        return [f.name for f in dataclasses.fields(self)]
