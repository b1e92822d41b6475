"""The ONNX ``Einsum`` operator (opset 12+) as the library calls it is made of: no kind of its own, a
mapper that gives other kinds' configs (registered under the Gemm kind, :mod:`benanza.kinds.gemm`).

Spec: https://onnx.ai/onnx/operators/onnx__Einsum.html (an equation ``"term1,term2->out"`` of letters
``[a-zA-Z]``, ``...`` for broadcast leading dims; without ``->`` the output is the letters that occur
exactly once, in alphabetical order, after the ellipsis dims). PyTorch computes one the same way
(``aten/src/ATen/native/Linear.cpp``, ``einsum`` and ``sumproduct_pair``): it sums away the letters
only one operand has, permutes each operand to (batch, kept, contracted) letters, reshapes them to
3-D and calls ``bmm``, then permutes the result to the output's order; a product with no contracted
letter is a broadcast ``mul``. :func:`map_einsum` gives exactly those calls, as benanza's configs:

- one operand: a pure permutation is a ``Transpose`` (:class:`benanza.kinds.copy.CopyConfig`), a sum
  over letters a ``ReduceSum`` (:class:`benanza.kinds.reduce.ReduceConfig`), followed by a
  ``Transpose`` when the kept letters change order;
- two operands with a contracted letter: one (strided-batched) GEMM
  (:class:`benanza.kinds.gemm.GemmConfig`, as :func:`benanza.kinds.gemm._map_matmul` gives a MatMul of
  the same shapes): batch letters (in both operands and the output) lead, M letters are A's and the
  output's, N letters B's and the output's, K letters both operands' and not the output's. Letters of a
  group that are neighbours in the same order merge into one GEMM dim (a reshape, free);
  ``trans_a``/``trans_b`` absorb an operand stored K-first / K-last; an output of the form (batch, N, M)
  swaps the operands (``Y^T = B^T A^T``). An operand or output whose letters fit none of these is
  permuted by a ``Transpose`` first (after, for the output), the contiguous copy torch makes;
- two operands without a contracted letter (outer products ``i,j->ij``, ``ij,ij->ij``): an
  elementwise ``Mul`` (:class:`benanza.kinds.elementwise.ElementwiseConfig`) with numpy broadcasting,
  as the exporters' Mul; letters summed in one operand only are a ``ReduceSum`` of it first.

Size-1 dims are dropped first (a reshape moves nothing; an ellipsis or letter of extent 1 against a
larger one broadcasts). Unsupported, with a one-line reason naming the equation: three or more
operands, a letter repeated in one term (a diagonal), a malformed equation, extents that differ.
A node of several calls is a tuple of :class:`benanza.kinds.onnx_map.Part` (processing makes one
layer per part, in order).
"""
from __future__ import annotations

import math
import re

from benanza.kinds.copy import CopyConfig
from benanza.kinds.elementwise import ElementwiseConfig, elem_name
from benanza.kinds.gemm import GemmConfig
from benanza.kinds.onnx_map import Part, Unsupported, need
from benanza.kinds.reduce import ReduceConfig

#: the most characters of an (untrusted) equation a reason quotes
_QUOTE = 60
_TERM = re.compile(r"^[a-zA-Z]*(\.\.\.)?[a-zA-Z]*$")
#: stand-ins for the ellipsis dims (ONNX letters are ASCII, so these never clash)
_ELLIPSIS = "0123456789"


def _quote(eq: str) -> str:
    return repr(eq if len(eq) <= _QUOTE else eq[:_QUOTE] + "...")


def _ellipsis(e: int) -> str:
    """The stand-ins of ``e`` ellipsis dims, right-aligned: the last dim is always ``0``."""
    return _ELLIPSIS[:e][::-1]


def parse_equation(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """The terms of Einsum equation ``eq`` for inputs of ``ranks``, with each ``...`` written out as
    the digits ``0``, ``1``, ... (right-aligned: the last ellipsis dim is the same digit in every
    term, as numpy broadcasting aligns them), and the output term (implicit when ``eq`` has no
    ``->``: ONNX's rule, the ellipsis dims then the letters that occur once, alphabetically). Each
    term is a string of one character per dim. Raises :class:`Unsupported` for a malformed equation,
    a term whose letters do not fit its input's rank, or a term that repeats a letter (a diagonal)."""
    q = _quote(eq)
    lhs, arrow, rhs = eq.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks) or not all(_TERM.match(t) for t in terms) or (arrow and not _TERM.match(rhs)):
        raise Unsupported(f"Einsum equation {q} is malformed for {len(ranks)} input(s)")
    ell, written = 0, []
    for t, r in zip(terms, ranks):
        n = len(t.replace("...", ""))
        if n > r or ("..." not in t and n != r):
            raise Unsupported(f"Einsum equation {q}: term {t!r} does not fit an input of rank {r}")
        e = r - n if "..." in t else 0
        if e > len(_ELLIPSIS):
            raise Unsupported(f"Einsum equation {q}: an ellipsis of {e} dims")
        ell = max(ell, e)
        written.append(t.replace("...", _ellipsis(e)))
    if any(len(set(t)) != len(t) for t in written):
        raise Unsupported(f"Einsum equation {q} takes a diagonal (a letter repeated in one term)")
    if arrow:
        out = rhs.replace("...", _ellipsis(ell))
        if len(set(out)) != len(out):
            raise Unsupported(f"Einsum equation {q} repeats a letter in its output")
        if set(out) - set("".join(written)):
            raise Unsupported(f"Einsum equation {q} has an output letter no input has")
    else:
        letters = "".join(written)
        out = _ellipsis(ell) + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in _ELLIPSIS))
    return written, out


def _extents(q: str, terms: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each letter's extent: the largest of its dims (a dim of 1 against a larger one broadcasts);
    Unsupported for two different extents above 1, or an empty input."""
    size: dict[str, int] = {}
    for t, s in zip(terms, shapes):
        for c, d in zip(t, s):
            if d == 0:
                raise Unsupported(f"Einsum {q} of an empty input")
            if size.get(c, 1) != 1 and d != 1 and d != size[c]:
                raise Unsupported(f"Einsum {q}: letter {c!r} has extents {size[c]} and {d}")
            size[c] = max(size.get(c, 1), d)
    return size


class _Plan:
    """The calls of one Einsum, appended in order (``sizes``: each letter's extent; ``dtype``: the
    element type the copies move, :func:`benanza.kinds.elementwise.elem_name`)."""

    def __init__(self, q: str, sizes: dict[str, int], dtype: str):
        self.q, self.sizes, self.dtype, self.calls = q, sizes, dtype, []

    def shape(self, letters) -> tuple[int, ...]:
        return tuple(self.sizes[c] for c in letters)

    def check_rank(self, letters) -> None:
        """Unsupported for more than 8 dims (the most a Transpose, ReduceSum or Mul layer takes, as for
        those ONNX ops: ``benanza.kinds.copy``, ``reduce``, ``elementwise``)."""
        if len(letters) > 8:
            raise Unsupported(f"Einsum {self.q}: rank {len(letters)} > 8")

    def transpose(self, have: str, want: str) -> str:
        """``have`` permuted to ``want`` (the same letters): a Transpose, none when the orders agree."""
        if have != want:
            self.check_rank(have)
            self.calls.append(CopyConfig(op="Transpose", inputs=(self.shape(have),), y=self.shape(want),
                                         attrs=(("perm", tuple(have.index(c) for c in want)),), dtype=self.dtype))
        return want

    def reduce_sum(self, have: str, keep) -> str:
        """``have`` summed over its letters not in ``keep``: a ReduceSum (y: x with them set to 1)."""
        gone = [c for c in have if c not in keep]
        if not gone:
            return have
        self.check_rank(have)
        self.calls.append(ReduceConfig(op="sum", x=self.shape(have),
                                       y=tuple(1 if c in gone else self.sizes[c] for c in have)))
        return "".join(c for c in have if c in keep)


def _gemm_layout(ob: str, rows: list[str], ks: str, t: str, first: bool) -> tuple[str, bool] | None:
    """(layout, transposed) of operand ``t`` if it is one of (batch, rows, K) or (batch, K, rows) as
    stored; for A (``first``) (batch, M, K) is not transposed, for B (batch, K, N) is not. None if neither."""
    rk, kr = ob + "".join(rows) + ks, ob + ks + "".join(rows)
    if t == rk:
        return rk, not first
    if t == kr:
        return kr, first
    return None


def _product(plan: _Plan, ta: str, tb: str, out: str) -> None:
    """The calls of a two-operand product ``ta,tb->out`` (no letter summed in one operand only)."""
    ob = "".join(c for c in out if c in ta and c in tb)
    ks_all = [c for c in ta if c in tb and c not in out]
    if not ks_all:  # no contraction: a broadcast Mul, each operand in the output's order
        ta = plan.transpose(ta, "".join(c for c in out if c in ta))
        tb = plan.transpose(tb, "".join(c for c in out if c in tb))
        a = tuple(plan.sizes[c] if c in ta else 1 for c in out)
        b = tuple(plan.sizes[c] if c in tb else 1 for c in out)
        plan.check_rank(out)
        plan.calls.append(ElementwiseConfig(op="mul", a=a, b=b))
        return
    ms = [c for c in out if c in ta and c not in tb]
    ns = [c for c in out if c in tb and c not in ta]
    if out != ob + "".join(ms + ns) and out == ob + "".join(ns + ms):
        ta, tb, ms, ns = tb, ta, ns, ms  # Y^T = B^T A^T: the output as the product writes it
    best = None
    for ks in dict.fromkeys(("".join(c for c in ta if c in ks_all), "".join(c for c in tb if c in ks_all))):
        la, lb = _gemm_layout(ob, ms, ks, ta, True), _gemm_layout(ob, ns, ks, tb, False)
        copies = (la is None) + (lb is None)
        if best is None or copies < best[0]:
            best = (copies, ks, la, lb)
    _, ks, la, lb = best
    if la is None:  # the contiguous copy torch makes, K kept innermost where it was
        la = (ob + "".join(ms) + ks, False) if ta[-1] in ks else (ob + ks + "".join(ms), True)
        plan.transpose(ta, la[0])
    if lb is None:
        lb = (ob + "".join(ns) + ks, True) if tb[-1] in ks else (ob + ks + "".join(ns), False)
        plan.transpose(tb, lb[0])
    size = plan.sizes
    plan.calls.append(GemmConfig(m=math.prod(size[c] for c in ms), n=math.prod(size[c] for c in ns),
                                 k=math.prod(size[c] for c in ks), batch_count=math.prod(size[c] for c in ob),
                                 trans_a=la[1], trans_b=lb[1]))
    plan.transpose(ob + "".join(ms + ns), out)


def map_einsum(node, ctx, attrs):
    """ONNX Einsum -> a config, or a tuple of :class:`benanza.kinds.onnx_map.Part` for several calls
    (module doc). Raises :class:`Unsupported` with a one-line reason naming the equation."""
    eq = attrs.get("equation")
    if not isinstance(eq, str):
        raise Unsupported("Einsum without an equation")
    q = _quote(eq)
    if not 1 <= len(node.input) <= 2:
        raise Unsupported(f"Einsum {q} of {len(node.input)} operands: only one or two are benchmarked")
    shapes = [tuple(need(ctx.shape(i), f"input {j}")) for j, i in enumerate(node.input)]
    terms, out = parse_equation(eq, [len(s) for s in shapes])
    sizes = _extents(q, terms, shapes)
    # dims of extent 1 are a reshape; an operand's dim of 1 against a larger extent broadcasts
    terms = ["".join(c for c, d in zip(t, s) if d > 1) for t, s in zip(terms, shapes)]
    out = "".join(c for c in out if sizes[c] > 1)
    plan = _Plan(q, sizes, elem_name(ctx, node.input[0], "Einsum"))
    if len(terms) == 1:
        plan.transpose(plan.reduce_sum(terms[0], out), out)
        if not plan.calls:  # a permutation of size-1 dims only: Transpose by the identity (zero-cost)
            plan.calls.append(CopyConfig(op="Transpose", inputs=(shapes[0],), y=shapes[0],
                                         attrs=(("perm", tuple(range(len(shapes[0])))),), dtype=plan.dtype))
    else:
        ta, tb = terms
        ta = plan.reduce_sum(ta, set(out) | set(tb))  # letters only one operand has and the output lacks
        tb = plan.reduce_sum(tb, set(out) | set(ta))
        _product(plan, ta, tb, out)
    if len(plan.calls) == 1:
        return plan.calls[0]
    return tuple(Part(c) for c in plan.calls)


#: the ONNX mappers this module adds to a kind (``benanza.kinds._registry``): Einsum is mapped with the
#: Gemm kind's (its calls are GEMMs, Transposes, ReduceSums and Muls); a module of its own that
#: imports gemm.py, so gemm.py cannot import it
ONNX = {"Gemm": {"Einsum": map_einsum}}
