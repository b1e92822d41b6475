"""What the ONNX op mappers of the kind modules share: the mapping context, attribute reading, shape
checks and the exception a mapper raises for a node it cannot benchmark."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx


class TP:
    """ONNX's element types (``TensorProto.DataType``), as the numbers the format stores. Kept here so
    that reading a model's processed layers needs no ``import onnx`` (half a second at start: it loads
    ml_dtypes); ``tests/test_onnx_dtypes.py`` checks every value against ONNX's own enum.
    Source: onnx/onnx.proto, ``message TensorProto { enum DataType }``."""

    UNDEFINED, FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL = range(10)
    FLOAT16, DOUBLE, UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = range(10, 17)
    FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, UINT4, INT4, FLOAT4E2M1 = range(17, 24)


#: every element type of :class:`TP` by its number
TYPE_NAMES = {v: k for k, v in vars(TP).items() if k.isupper()}


def type_name(t) -> str:
    """ONNX's name of element type ``t`` (``FLOAT16``); ``"an unknown type"`` for a number ONNX has not
    defined (or None: an element type inference left unknown)."""
    return TYPE_NAMES.get(t, "an unknown type")


FLOAT_TYPES = {TP.FLOAT: "float32", TP.FLOAT16: "float16", TP.BFLOAT16: "bfloat16", TP.DOUBLE: "float64"}


class MapContext(Protocol):
    """What an op mapper may read of the model (built by ``benanza.processing.model``): the opset,
    inferred shapes and element types by tensor name, constant tensors, the names of static tensors."""

    opset: int
    types: dict[str, int]
    static: set[str]

    def shape(self, name: str) -> tuple[int, ...] | None:
        """The inferred shape of tensor ``name`` (None when inference left it unknown)."""

    def value(self, name: str) -> np.ndarray | None:
        """The value of constant ``name`` (None when it is not a constant with data)."""

    def dims(self, name: str) -> tuple[int | None, ...] | None:
        """The inferred dims of tensor ``name`` as far as inference knows them: an int per known
        dim, None for a symbolic or unknown one (``?`` in an export); None when even the rank is
        unknown. :meth:`shape` is None for such a tensor; a mapper may complete it from a rule."""

    def static_value(self, name: str) -> np.ndarray | None:
        """The value of static tensor ``name`` (computed from constants only), evaluated on demand
        where folding kept none because it is large (an attention mask of 2,048 x 2,048
        positions); None when it is not static or too large to evaluate."""


class Unsupported(Exception):
    """Raised by a mapper: the node cannot be benchmarked; the message is the reason."""


def node_attrs(node: onnx.NodeProto) -> dict:
    """The node's attributes by name, as ``onnx.helper.get_attribute_value`` reads them (strings decoded
    as UTF-8)."""
    import onnx.helper

    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        out[a.name] = v
    return out


def need(shape, what: str):
    if shape is None:
        raise Unsupported(f"{what} shape unknown after shape inference")
    return shape


def spatial_pads(attrs: dict, x: tuple[int, ...], kernel: tuple[int, ...], strides, dilations):
    nsp = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nsp):
            out = -(-x[2 + i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - x[2 + i])
            small, big = total // 2, total - total // 2
            if auto == "SAME_UPPER":
                begin.append(small)
                end.append(big)
            else:
                begin.append(big)
                end.append(small)
        return tuple(begin + end)
    if auto == "VALID":
        return (0,) * (2 * nsp)
    pads = tuple(int(p) for p in attrs.get("pads", [0] * (2 * nsp)))
    if len(pads) != 2 * nsp:
        raise Unsupported(f"pads has {len(pads)} values for {nsp} spatial dims")
    if any(p < 0 for p in pads):
        raise Unsupported("negative pads")
    return pads


def scalar_input(ctx: MapContext, node, idx: int):
    if len(node.input) <= idx or not node.input[idx]:
        return None
    v = ctx.value(node.input[idx])
    if v is None:
        raise Unsupported(f"input {idx} is not a constant")
    return float(np.asarray(v).reshape(-1)[0])


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
    r = max(len(a), len(b))
    a = (1,) * (r - len(a)) + tuple(a)
    b = (1,) * (r - len(b)) + tuple(b)
    y = []
    for da, db in zip(a, b):
        if da != db and 1 not in (da, db):
            raise Unsupported(f"shapes {a} and {b} do not broadcast")
        y.append(max(da, db))
    return a, b, tuple(y)


#: ONNX's integer and bool element types by the names of :data:`benanza.kinds.STORED_TYPES`
STORED_NAMES = {TP.BOOL: "bool", TP.INT8: "int8", TP.UINT8: "uint8", TP.INT16: "int16", TP.UINT16: "uint16",
                TP.INT32: "int32", TP.UINT32: "uint32", TP.INT64: "int64", TP.UINT64: "uint64"}


# ------------------------------------------------------------- operators outside ONNX's own set

#: the domain of ONNX Runtime's contrib operators (onnxruntime ``docs/ContribOperators.md``)
MS_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class ContribOp:
    """An operator ONNX does not define that a kind maps (``Kind.contrib``, keyed by (domain, op type)):
    ONNX Runtime's ``com.microsoft`` contrib ops, and the ops ONNX Runtime registers in the default
    domain though onnx has no schema for them (``SimplifiedLayerNormalization``; onnx's checker refuses
    such a node, ``benanza.processing.model`` checks the rest of the model without it).

    - ``mapper``: ``(node, MapContext, attributes) -> config`` or a tuple of :class:`Part` (a node that
      makes several library calls); raises :class:`Unsupported`.
    - ``shapes``: ``(node, MapContext, attributes) -> [(shape or None, ONNX element type or None), ...]``,
      one per node output: the op's output shapes from its inputs (onnx's shape inference gives
      none for an op it does not know, so the layers after it would have none either;
      ``benanza.processing.graph.infer_shapes`` applies the rule and infers again). A rule raises
      nothing: a shape it cannot tell is None.
    - ``spec``: where the operator is specified (the address of its section in ONNX Runtime's docs).
    - ``aten``: the ATen ops of a PyTorch profile that implement it (``profiles.join``).
    """

    mapper: Callable
    shapes: Callable
    spec: str
    aten: tuple[str, ...] = ()


@dataclass(frozen=True)
class Part:
    """One library call of a node that makes several (a contrib op with a residual Add or a projection
    GEMM inside): ``config`` the call's layer config; ``outputs`` the indices of the node's outputs the
    call writes (() : a tensor only the next part reads). The parts run in order, each after the one
    before; the last writes the node's first output."""

    config: object
    outputs: tuple[int, ...] = ()


def contrib_doc(op: str) -> str:
    """The address of ``com.microsoft`` ``op``'s section of ONNX Runtime's contrib operator docs."""
    return f"https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md#com.microsoft.{op}"
