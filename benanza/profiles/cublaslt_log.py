"""cuBLASLt log: the matmuls a framework (or cuDNN's GEMM-based engines) ran, with their algorithms.

Source of the format: the log cuBLASLt 13 writes with ``CUBLASLT_LOG_LEVEL=5`` (or ``2`` for the
trace lines alone; ``CUBLASLT_LOG_FILE`` names the file; checked on cuBLASLt 13.1 under PyTorch
2.11, ``shared/samples``). One line per event::

    [2026-11-21 13:07:59][cublasLt][729][Trace][cublasLtMatmul] A=0X7F.. Adesc=[type=R_32F rows=2048
        cols=1000 ld=2048] B=.. Bdesc=[...] C=.. Cdesc=[...] D=.. Ddesc=[...] computeDesc=[computeType=
        COMPUTE_32F scaleType=R_32F transa=OP_T epilogue=EPILOGUE_BIAS biasPointer=0x..] algo=[algoId=13
        customOption=75] workSpace=0X.. workSpaceSizeInBytes=1048576 beta=0 outOfPlace=0 stream=0X0

(``[time][cublasLt][process][level][function] key=value ...``; a value is a token or a bracketed
``[k=v k=v]`` group.) The ``Trace`` line of ``cublasLtMatmul`` has the shapes, types, the compute
type and the algorithm (``algoId``, ``tile``, ``stages``, ``numSplitsK``, ``reductionScheme``,
``customOption``, ``ctaSwizzling`` when not default); the ``Api`` line has only pointers and is not
used. Layouts are column-major: ``D (m x n) = op(A) (m x k) * op(B) (k x n)``.

A last line without its newline is a partial line of a log cut at an arbitrary byte: it is dropped
and :attr:`CublasLtLog.truncated` says so. Any other line that does not follow the format is an
error naming the file and line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import ProfileError
from benanza.profiles.cudnn_log import LogLines

_LINE = re.compile(r"^\[([^\]]*)\]\[cublasLt\]\[(\d+)\]\[(\w+)\]\[(\w+)\]\s?(.*)$")


@dataclass(frozen=True)
class MatrixLayout:
    """A cuBLASLt matrix layout: element ``type`` (``R_32F``...), ``rows`` x ``cols`` (column-major
    unless ``order`` says otherwise), leading dimension ``ld``, ``batch_count`` and the
    ``batch_stride`` (elements) between matrices of a strided batch (0 if not set)."""

    type: str
    rows: int
    cols: int
    ld: int
    batch_count: int = 1
    batch_stride: int = 0
    order: str | None = None


@dataclass(frozen=True)
class Matmul:
    """One ``cublasLtMatmul`` call: ``D = op(A) op(B)`` (+ epilogue).

    ``m``, ``n``, ``k``: the problem in cuBLASLt's column-major terms (D is m x n); ``batch``: the
    batch count. ``compute_type`` (``COMPUTE_32F``, ``COMPUTE_32F_FAST_TF32`` = TF32 Tensor Cores,
    ``COMPUTE_32F_FAST_16F``...), ``transa``/``transb`` (``OP_N``/``OP_T``), ``epilogue``
    (``EPILOGUE_BIAS``..., ``EPILOGUE_DEFAULT`` if none). ``algo``: the algorithm's fields as
    logged (``algoId``, ``tile``, ``stages``, ``numSplitsK``...); ``workspace_bytes``; ``line`` (1-based);
    ``time``: the line's timestamp text (second resolution).
    """

    line: int
    time: str
    a: MatrixLayout
    b: MatrixLayout
    c: MatrixLayout
    d: MatrixLayout
    compute_type: str
    scale_type: str | None
    transa: str
    transb: str
    epilogue: str
    algo: tuple[tuple[str, str], ...]
    workspace_bytes: int | None

    @property
    def m(self) -> int:
        return self.d.rows

    @property
    def n(self) -> int:
        return self.d.cols

    @property
    def k(self) -> int:
        return self.a.rows if self.transa == "OP_T" else self.a.cols

    @property
    def batch(self) -> int:
        return max(self.d.batch_count, self.a.batch_count, self.b.batch_count, 1)

    @property
    def algo_id(self) -> int | None:
        v = dict(self.algo).get("algoId")
        return int(v) if v is not None and v.lstrip("-").isdigit() else None

    @property
    def algorithm(self) -> str:
        """The algorithm in one string: ``algo21 tile=64x64 stages=32x6 splitK=5 reduction=
        COMPUTE_TYPE`` (fields the log leaves out are defaults and are left out here too)."""
        a = dict(self.algo)
        parts = [f"algo{a.get('algoId', '?')}"]
        for key, label, strip in (("tile", "tile", "MATMUL_TILE_"), ("stages", "stages", "MATMUL_STAGES_"),
                                  ("numSplitsK", "splitK", ""), ("reductionScheme", "reduction", "REDUCTION_SCHEME_"),
                                  ("ctaSwizzling", "swizzle", ""), ("customOption", "custom", "")):
            if key in a:
                v = a[key]
                parts.append(f"{label}={v[len(strip):] if strip and v.startswith(strip) else v}")
        for key, v in self.algo:
            if key not in ("algoId", "tile", "stages", "numSplitsK", "reductionScheme", "ctaSwizzling", "customOption"):
                parts.append(f"{key}={v}")
        return " ".join(parts)

    @property
    def tensor_core(self) -> bool | None:
        """Whether the compute type allows Tensor Core math (TF32/FP16/BF16 inputs or fast modes);
        None when the log does not tell."""
        ct = self.compute_type
        if "FAST" in ct or ct.startswith("COMPUTE_16F"):
            return True
        if self.a.type in ("R_16F", "R_16BF", "R_8F_E4M3", "R_8F_E5M2"):
            return True
        if ct in ("COMPUTE_32F", "COMPUTE_64F", "COMPUTE_32F_PEDANTIC", "COMPUTE_64F_PEDANTIC"):
            return False
        return None

    def gemm_key(self) -> tuple[tuple[int, int], int, int]:
        """``((min(m,n), max(m,n)), k, batch)``: the problem without the orientation, since a
        row-major framework computes ``C = A B`` as the column-major ``C^T = B^T A^T``."""
        return (tuple(sorted((self.m, self.n))), self.k, self.batch)


@dataclass(frozen=True)
class CublasLtLog:
    """A parsed cuBLASLt log: its ``version`` (e.g. ``"13.1"``, from the ``cublasLtCreate`` info
    line; None if absent), every ``matmuls`` in log order, the count of ``calls`` per API function,
    the ``heuristic_results`` lists (algo ids ``cublasLtMatmulAlgoGetHeuristic`` returned, in log
    order), whether the last line was ``truncated`` (and dropped), ``lines`` read."""

    path: str
    version: str | None
    matmuls: tuple[Matmul, ...]
    calls: dict
    heuristic_results: tuple[tuple[int, ...], ...]
    truncated: bool
    lines: int

    def by_problem(self) -> dict[tuple, list[Matmul]]:
        """Matmuls grouped by :meth:`Matmul.gemm_key`, in log order."""
        out: dict[tuple, list[Matmul]] = {}
        for mm in self.matmuls:
            out.setdefault(mm.gemm_key(), []).append(mm)
        return out


def _tokens(text: str) -> dict[str, str]:
    """``k=v k=[a=b c=d] x=[1,2]`` -> {k: v, ...}; bracket groups stay text (without brackets)."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        sp = text.find(" ", i)
        if eq < 0 or (0 <= sp < eq):
            # a bare word (part of a free-text message): skip it
            i = n if sp < 0 else sp + 1
            continue
        key = text[i:eq]
        j = eq + 1
        if j < n and text[j] == "[":
            depth, k = 0, j
            while k < n:
                if text[k] == "[":
                    depth += 1
                elif text[k] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if k >= n:
                raise ValueError(f"unclosed '[' after {key}=")
            out[key] = text[j + 1:k]
            i = k + 1
        else:
            k = text.find(" ", j)
            k = n if k < 0 else k
            out[key] = text[j:k]
            i = k
    return out


def _layout(text: str | None, what: str) -> MatrixLayout:
    if text is None:
        raise ValueError(f"no {what}")
    t = _tokens(text)
    try:
        return MatrixLayout(type=t["type"], rows=int(t["rows"]), cols=int(t["cols"]), ld=int(t.get("ld", 0)),
                            batch_count=int(t.get("batchCount", 1)),
                            batch_stride=int(t.get("stridedBatchOffset", 0)), order=t.get("order"))
    except KeyError as e:
        raise ValueError(f"{what} has no {e.args[0]}") from None


def read_cublaslt_log(path: str | os.PathLike) -> CublasLtLog:
    """Parse a cuBLASLt log (text or gzip) into a :class:`CublasLtLog`.

    Raises :class:`ProfileError` naming the file and line for a file that is not a cuBLASLt log,
    or a line mid-file that breaks the format (a partial last line is dropped, not an error).
    """
    p = Path(path)
    src = LogLines(p)
    matmuls: list[Matmul] = []
    calls: dict[str, int] = {}
    heur: list[tuple[int, ...]] = []
    version = None
    seen = 0
    for no, line in src:
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            if seen == 0:
                raise ProfileError(f"{p}: line {no}: not a cuBLASLt log (expected a line like "
                                   f"'[2026-11-21 13:07:56][cublasLt][729][Api][cublasLtCreate] ...')")
            raise ProfileError(f"{p}: line {no}: unexpected text {line[:60]!r}: malformed cuBLASLt log")
        seen += 1
        time, _, level, fn, rest = m.groups()
        if level == "Api":
            calls[fn] = calls.get(fn, 0) + 1
        try:
            if level == "Info" and fn == "cublasLtCreate" and version is None:
                v = re.search(r"cuBLASLt v(\d+\.\d+(?:\.\d+)?)", rest)
                version = v.group(1) if v else None
            elif level == "Info" and fn == "cublasLtMatmulAlgoGetHeuristic":
                t = _tokens(rest)
                if "heuristicResults" in t:
                    heur.append(tuple(int(x) for x in t["heuristicResults"].split(",") if x.strip()))
            elif level == "Trace" and fn == "cublasLtMatmul":
                t = _tokens(rest)
                cd = _tokens(t.get("computeDesc", ""))
                if "computeType" not in cd:
                    raise ValueError("computeDesc has no computeType")
                algo = tuple((k, v) for k, v in _tokens(t.get("algo", "")).items())
                ws = t.get("workSpaceSizeInBytes")
                matmuls.append(Matmul(
                    line=no, time=time, a=_layout(t.get("Adesc"), "Adesc"), b=_layout(t.get("Bdesc"), "Bdesc"),
                    c=_layout(t.get("Cdesc"), "Cdesc"), d=_layout(t.get("Ddesc") or t.get("Cdesc"), "Ddesc"),
                    compute_type=cd["computeType"], scale_type=cd.get("scaleType"),
                    transa=cd.get("transa", "OP_N"), transb=cd.get("transb", "OP_N"),
                    epilogue=cd.get("epilogue", "EPILOGUE_DEFAULT"), algo=algo,
                    workspace_bytes=int(ws) if ws is not None and ws.isdigit() else None))
        except (ValueError, KeyError) as e:
            raise ProfileError(f"{p}: line {no}: malformed {fn} {level} line ({e})") from None
    if seen == 0:
        raise ProfileError(f"{p}: {'empty file' if not src.count else 'no cuBLASLt line'}: not a cuBLASLt log")
    return CublasLtLog(path=str(p), version=version, matmuls=tuple(matmuls), calls=calls,
                       heuristic_results=tuple(heur), truncated=src.cut,  # a partial last line was left out
                       lines=src.count)
