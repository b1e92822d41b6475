"""cuDNN API log: which engine configs (graph API) and algorithms (legacy API) a framework ran.

Source of the format: the log cuDNN 9 writes with ``CUDNN_LOGLEVEL_DBG=3`` (``CUDNN_LOGDEST_DBG``
names the file; checked on cuDNN 9.19 under PyTorch 2.11, ``shared/samples``). The log is a
sequence of records separated by blank lines::

    I! CuDNN (v91900 56) function cudnnBackendExecute() called:
    i!     handle: type=cudnnHandle_t:
    i!         streamId: type=cudaStream_t; streamId=(nil) (defaultStream);
    i!     executionPlan: type=CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    i!         engcfg: type=CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    i!             engine: type=CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    i!                 opGraph: ... operation: ... xDesc/wDesc/yDesc/convDesc ...
    i!                 engine_id: type=int; val=28;
    i!                 knobDesc: type=cudnnBackendDescriptor_t:
    i!                     CUDNN_KNOB_TYPE_TILE_SIZE: type=int; val=4;
    i! Time: 2026-11-21T13:07:56.561016 (0d+0h+0m+1s since start)
    i! Process=729; Thread=729; GPU=0; Handle=0x263b46e0; StreamId=(nil) (defaultStream).

The header's first letter is the level (``I`` info, ``W`` warning, ``E`` error; body lines repeat it
in lower case); nesting is 4 spaces per level; a field is ``name: type=T; val=V;`` or, with
children, ``name: type=T:``. cuDNN 9 logs a call twice: on entry with its arguments and on exit with
its ``status``. ``engine_id`` is the engine's global index (``CUDNN_ATTR_ENGINE_GLOBAL_INDEX``);
knob choices are ``CUDNN_KNOB_TYPE_*`` values. Each graph execution is also followed by a
``cudnnBackendExecuteInternal`` record (enable_tf32, the engine and knobs again), which fills in
what the ``cudnnBackendExecute`` record left out (it sometimes logs an empty execution plan).

Convolution backward calls (a training step): the legacy ``cudnnConvolutionBackwardData`` (``wDesc``,
``dyDesc``, ``convDesc``, ``algo`` = ``CUDNN_CONVOLUTION_BWD_DATA_ALGO_*``, ``workSpaceSizeInBytes``,
``dxDesc``: its parameters' names in cudnn_cnn.h) and ``cudnnConvolutionBackwardFilter`` (``xDesc``,
``dyDesc``, ``convDesc``, ``algo`` = ``CUDNN_CONVOLUTION_BWD_FILTER_ALGO_*``, ``dwDesc``), and graph
executions whose operation is ``CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR`` /
``..._BACKWARD_FILTER_DESCRIPTOR`` (the same record layout as the forward's, tensors named after
the operation's attributes: ``dxDesc``/``wDesc``/``dyDesc``, ``xDesc``/``dwDesc``/``dyDesc``). An
execution's :attr:`Execution.direction` tells them apart; a gradient tensor fills the slot of the
forward tensor of the same shape (dx -> ``x``, dw -> ``w``, dy -> ``y``), so that a backward call
has its convolution's :attr:`Execution.conv_key`.

A log cut at an arbitrary byte (the first megabytes of a long run) ends in a partial record: it is
dropped and :attr:`CudnnLog.truncated` says so. Anything else that does not follow the format is
an error naming the file and line.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import ProfileError

_HEADER = re.compile(r"^([IWE])! CuDNN \(v(\d+)(?: (\d+))?\) function (\w+)\(\) called:\s*$")
_BODY = re.compile(r"^([iwe])! ?(.*)$")

#: cudnnBackendKnobType_t values (cudnn_graph_v9.h, cuDNN 9.19), for engine config names in
#: cudnn-frontend's plan-tag form ``eng<global index>_k<knob type>=<choice>...``
KNOB_TYPES = {
    "SPLIT_K": 0, "SWIZZLE": 1, "TILE_SIZE": 2, "USE_TEX": 3, "EDGE": 4, "KBLOCK": 5, "LDGA": 6, "LDGB": 7,
    "CHUNK_K": 8, "SPLIT_H": 9, "WINO_TILE": 10, "MULTIPLY": 11, "SPLIT_K_BUF": 12, "TILEK": 13, "STAGES": 14,
    "REDUCTION_MODE": 15, "CTA_SPLIT_K_MODE": 16, "SPLIT_K_SLC": 17, "IDX_MODE": 18, "SLICED": 19,
    "SPLIT_RS": 20, "SINGLEBUFFER": 21, "LDGC": 22, "SPECFILT": 23, "KERNEL_CFG": 24, "WORKSPACE": 25,
    "TILE_CGA": 26, "TILE_CGA_M": 27, "TILE_CGA_N": 28, "BLOCK_SIZE": 29, "OCCUPANCY": 30,
    "ARRAY_SIZE_PER_THREAD": 31, "NUM_C_PER_BLOCK": 32, "SPLIT_COLS": 33, "TILE_ROWS": 34, "TILE_COLS": 35,
    "LOAD_SIZE": 36, "CTA_COUNT": 37, "STREAM_K": 38, "SPLIT_P_SLC": 39, "TILE_M": 40, "TILE_N": 41,
    "WARP_SPEC_CFG": 42, "SWAP_AB": 43, "INPUT_TMA_ENABLE": 44, "OUTPUT_TMA_ENABLE": 45,
}

#: legacy calls that compute something, with the argument naming their algorithm (if any)
LEGACY_CALLS = {
    "cudnnConvolutionForward": "algo",
    "cudnnConvolutionBiasActivationForward": "algo",
    "cudnnConvolutionBackwardData": "algo",
    "cudnnConvolutionBackwardFilter": "algo",
    "cudnnBatchNormalizationForwardInference": None,
    "cudnnNormalizationForwardInference": None,
    "cudnnActivationForward": None,
    "cudnnPoolingForward": None,
    "cudnnSoftmaxForward": None,
    "cudnnAddTensor": None,
    "cudnnOpTensor": None,
    "cudnnScaleTensor": None,
    "cudnnTransformTensor": None,
    "cudnnLRNCrossChannelForward": None,
    "cudnnDropoutForward": None,
    "cudnnReduceTensor": None,
    "cudnnRNNForward": None,
}


@dataclass
class Field:
    """One logged field: ``name``, its ``type`` and ``val`` (text as logged, may be None) and its
    children (a nested descriptor)."""

    name: str
    type: str | None
    val: str | None
    children: list["Field"] = field(default_factory=list)

    def get(self, name: str) -> "Field | None":
        for c in self.children:
            if c.name == name:
                return c
        return None

    def find(self, name: str) -> "Field | None":
        """The first descendant named ``name`` (depth first)."""
        for c in self.children:
            if c.name == name:
                return c
            f = c.find(name)
            if f is not None:
                return f
        return None

    def find_all(self, name: str) -> list["Field"]:
        out = []
        for c in self.children:
            if c.name == name:
                out.append(c)
            out.extend(c.find_all(name))
        return out


@dataclass
class Record:
    """One log record: ``level`` (I, W, E), the cuDNN ``version`` (e.g. 91900), the ``function``,
    the 1-based ``line`` of its header, its fields (a root :class:`Field`), ``time`` (ISO text) and
    the ``thread`` (from the trailer)."""

    level: str
    version: int
    function: str
    line: int
    root: Field
    time: str | None = None
    thread: str | None = None
    text: list[str] = field(default_factory=list)
    first_field: str | None = None

    @property
    def is_exit(self) -> bool:
        """True for the exit record of a call (it logs only the returned status)."""
        return self.first_field == "status"

    @property
    def status(self) -> str | None:
        f = self.root.get("status")
        return _enum(f.val) if f is not None else None


@dataclass(frozen=True)
class Execution:
    """One computation cuDNN ran: a graph-API ``cudnnBackendExecute`` or a legacy call.

    ``api``: ``"graph"`` or the legacy function name. ``operations``: the graph's operation kinds
    (``CONVOLUTION_FORWARD``, ``POINTWISE``...; the legacy call's kind for legacy calls).
    ``engine_id``: the engine's global index (graph API; None if not logged). ``knobs``: the engine
    config's knob choices, ``(("TILE_SIZE", 4), ("USE_TEX", 0))``. ``algorithm``: the legacy
    algorithm enum (``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM``), None for the graph API.
    ``x``/``w``/``y``: dims of the input, filter and output (``()`` if absent); ``x_strides``/
    ``y_strides`` their strides (NCHW-packed strides mean an NCHW tensor). ``pads``/``strides``/
    ``dilations``: per spatial dim; ``groups``. ``data_type``/``compute_type``/``math_type``:
    cuDNN enum names; ``tf32``: whether TF32 was enabled (``enable_tf32`` of the internal record).
    ``workspace_bytes``: legacy ``workSpaceSizeInBytes`` (None for the graph API). ``line``: the
    1-based line of the record; ``time``: its timestamp text; ``status``: of the exit record.
    """

    api: str
    line: int
    time: str | None
    operations: tuple[str, ...]
    engine_id: int | None
    knobs: tuple[tuple[str, int], ...]
    algorithm: str | None
    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    x_strides: tuple[int, ...]
    y_strides: tuple[int, ...]
    pads: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    groups: int
    data_type: str | None
    compute_type: str | None
    math_type: str | None
    tf32: bool | None
    workspace_bytes: int | None
    status: str | None

    @property
    def engine_config(self) -> str | None:
        """cudnn-frontend's plan name ``eng<id>_k<knob type>=<choice>...`` (how benanza's database
        names graph-API engine configs); the legacy algorithm for legacy calls; None if unknown."""
        if self.api != "graph":
            return self.algorithm
        if self.engine_id is None:
            return None
        return f"eng{self.engine_id}" + "".join(f"_k{KNOB_TYPES.get(k, k)}={v}" for k, v in self.knobs)

    @property
    def layout(self) -> str:
        """``"NCHW"`` when x is packed channels-first, ``"NHWC"`` when packed channels-last, else ``"?"``."""
        return _layout(self.x, self.x_strides)

    @property
    def direction(self) -> str | None:
        """A convolution's direction: ``forward``, ``backward_data`` (dgrad: dx from dy and w) or
        ``backward_filter`` (wgrad: dw from x and dy), from its graph operation or legacy function;
        None for other operations or when the record does not say."""
        words = " ".join(self.operations) + " " + self.api
        for d, keys in _DIRECTIONS:
            if any(k in words for k in keys):
                return d
        return None

    @property
    def conv_key(self) -> tuple | None:
        """What identifies the convolution problem (dims, pads, strides, dilations, groups), to
        match executions with a model's Conv layers; None for other operations."""
        if not self.w or not self.x:
            return None
        return (self.x, self.w, self.pads, self.strides, self.dilations, self.groups)


@dataclass(frozen=True)
class CudnnLog:
    """A parsed cuDNN API log. ``version``: cuDNN version (e.g. 91900); ``executions``: every
    computation, in log order; ``calls``: how many records each function has (entry records only);
    ``warnings``/``errors``: the text of W/E records (first line each); ``truncated``: whether the
    last record was cut off (and dropped); ``lines``: lines read."""

    path: str
    version: int | None
    executions: tuple[Execution, ...]
    calls: dict
    warnings: tuple[str, ...]
    errors: tuple[str, ...]
    truncated: bool
    lines: int

    def graph_executions(self) -> list[Execution]:
        return [e for e in self.executions if e.api == "graph"]

    def engines_by_conv(self, direction: str = "forward") -> dict[tuple, list[Execution]]:
        """Convolution executions of ``direction`` (:attr:`Execution.direction`; ``forward`` also
        takes executions whose direction the log does not say) grouped by
        :attr:`Execution.conv_key`, in log order. A backward call has the conv_key of its forward
        convolution: the direction keeps a layer's gradients out of its forward choice."""
        ok = (direction, None) if direction == "forward" else (direction,)
        out: dict[tuple, list[Execution]] = {}
        for e in self.executions:
            if e.conv_key is not None and e.direction in ok:
                out.setdefault(e.conv_key, []).append(e)
        return out


#: :attr:`Execution.direction` of a convolution execution: the words its graph operation or
#: internal operation (``CONV_FORWARD``, ``CONVOLUTION_BACKWARD_DATA``...) or legacy function holds
_DIRECTIONS = (("backward_data", ("BACKWARD_DATA", "BWD_DATA", "DGRAD", "ConvolutionBackwardData")),
               ("backward_filter", ("BACKWARD_FILTER", "BWD_FILTER", "WGRAD", "ConvolutionBackwardFilter")),
               ("forward", ("CONVOLUTION_FORWARD", "CONV_FORWARD", "FPROP", "ConvolutionForward",
                            "ConvolutionBiasActivationForward")))
#: legacy algorithm enum prefixes, as benanza's suites name the algorithms (``conv_*_algo_name`` of
#: cpp/include/benanza/cudnn_util.hpp: ``IMPLICIT_PRECOMP_GEMM``, ``ALGO_1``, ``FFT``...)
_ALGO_PREFIXES = ("CUDNN_CONVOLUTION_FWD_ALGO_", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_",
                  "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_")


def legacy_algorithm(enum: str | None) -> str | None:
    """A legacy convolution algorithm's cuDNN enum name as benanza's database names it:
    ``CUDNN_CONVOLUTION_BWD_DATA_ALGO_1`` -> ``ALGO_1``, ``CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT``
    -> ``FFT``, ``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM`` -> ``IMPLICIT_GEMM`` (the suites'
    ``conv_*_algo_name``); other text unchanged; None stays None."""
    if enum is None:
        return None
    for pre in _ALGO_PREFIXES:
        if enum.startswith(pre):
            rest = enum[len(pre):]
            return f"ALGO_{rest}" if rest.isdigit() else rest
    return enum


# ---------------------------------------------------------------------------------------- parsing

def _enum(val: str | None) -> str | None:
    """``CUDNN_DATA_FLOAT (0)`` -> ``CUDNN_DATA_FLOAT``."""
    if val is None:
        return None
    return re.sub(r"\s*\(-?\d+\)$", "", val.strip())


def _ints(val: str | None) -> tuple[int, ...]:
    if not val:
        return ()
    v = val.strip()
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    try:
        return tuple(int(t) for t in v.split(",") if t.strip())
    except ValueError:
        return ()


def _int(val: str | None) -> int | None:
    if val is None:
        return None
    m = re.match(r"^\s*(-?\d+)", val)
    return int(m.group(1)) if m else None


def _layout(dims: tuple[int, ...], strides: tuple[int, ...]) -> str:
    if len(dims) < 3 or len(strides) != len(dims):
        return "?"
    def packed(order):
        s = 1
        for i in reversed(order):
            if dims[i] != 1 and strides[i] != s:
                return False
            s *= dims[i]
        return True
    nd = len(dims)
    if packed(list(range(nd))):
        return "NCHW"
    if packed([0] + list(range(2, nd)) + [1]):
        return "NHWC"
    return "?"


def _parse_field(text: str) -> tuple[str, str | None, str | None, bool]:
    """``name: type=T; val=V;`` -> (name, T, V, has_children)."""
    name, sep, rest = text.partition(": ")
    if not sep:
        if text.endswith(":"):
            return text[:-1], None, None, True
        return text, None, None, False
    rest = rest.rstrip()
    nested = rest.endswith(":") and "val=" not in rest
    if nested:
        rest = rest[:-1]
    t = re.match(r"type=([^;:]+)", rest)
    typ = t.group(1).strip() if t else None
    val = None
    i = rest.find("val=")
    if i >= 0:
        val = rest[i + 4:]
        if val.endswith(";"):
            val = val[:-1]
    elif not nested:
        val = rest[:-1] if rest.endswith(";") else rest
    return name.strip(), typ, val, nested


class LogLines:
    """The complete lines of a text or gzip log file, streamed: ``for no, line in LogLines(path)``
    (1-based numbers, no newline). A last line without its newline, or the end of a gzip stream
    cut short, is partial: it is left out and :attr:`cut` is set once iteration ends.
    :attr:`count` is the number of lines yielded. Raises :class:`ProfileError` for a missing or
    unreadable file, corrupt gzip data, or binary content."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.cut = False
        self.count = 0

    def __iter__(self):
        p = self.path
        try:
            f = open(p, "rb")
        except FileNotFoundError:
            raise ProfileError(f"{p}: no such file") from None
        except IsADirectoryError:
            raise ProfileError(f"{p}: is a folder, not a log file") from None
        except OSError as e:
            raise ProfileError(f"{p}: cannot read: {e.strerror}") from None
        with f:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            stream = gzip.GzipFile(fileobj=f) if gz else f
            pending = None
            try:
                for raw in stream:
                    if pending is None and self.count == 0 and b"\x00" in raw[:4096]:
                        raise ProfileError(f"{p}: binary data, not a text log")
                    if pending is not None:
                        self.count += 1
                        yield self.count, pending.decode("utf-8", errors="replace").rstrip("\r\n")
                    pending = raw
            except EOFError:
                self.cut = True  # the gzip stream ends early: what was read is kept
            except (OSError, zlib.error) as e:
                raise ProfileError(f"{p}: corrupt gzip data ({e})") from None
            if pending is not None:
                if pending.endswith(b"\n") and not self.cut:
                    self.count += 1
                    yield self.count, pending.decode("utf-8", errors="replace").rstrip("\r\n")
                else:
                    self.cut = True  # a partial last line


class RecordReader:
    """The records of a cuDNN log (text or gzip), streamed: ``for rec in RecordReader(path)``.

    Fields are parsed only for the records of ``functions`` (all when None); the others keep
    their header, trailer and first field name (enough to tell an exit record). After iteration,
    :attr:`truncated` says whether a partial last record (no ``Time:``/``Process=`` trailer, or a
    cut line) was dropped and :attr:`lines` how many lines were read. Raises :class:`ProfileError`
    naming the file and line for a file that is not a cuDNN log or breaks the format mid-file.
    """

    def __init__(self, path: str | os.PathLike, functions: set[str] | None = None):
        self.path = Path(path)
        self.functions = functions
        self.truncated = False
        self.lines = 0

    def __iter__(self):
        p = self.path
        src = LogLines(p)
        cur: Record | None = None
        parse = True
        stack: list[tuple[int, Field]] = []
        n_records = 0
        for no, line in src:
            if not line.strip():
                if cur is not None and cur.thread is not None:
                    n_records += 1
                    yield cur  # a blank line inside a record (warnings have one) is not its end
                    cur = None
                continue
            m = _HEADER.match(line)
            if m:
                if cur is not None:
                    if cur.thread is None:
                        raise ProfileError(f"{p}: line {no}: new record before the end of {cur.function} "
                                           f"(line {cur.line}): malformed cuDNN log")
                    n_records += 1
                    yield cur
                cur = Record(level=m.group(1), version=int(m.group(2)), function=m.group(4), line=no,
                             root=Field("", None, None))
                parse = self.functions is None or cur.function in self.functions
                stack = [(-1, cur.root)]
                continue
            b = _BODY.match(line)
            if b is None and cur is not None and cur.thread is None and not line.startswith(("I!", "W!", "E!")):
                # a message that continues on the next line without the "i! " prefix (cuDNN 9.19's
                # warnings, e.g. "Reason: no search results ...\n at: 0 == newResults"): part of
                # the last field
                last = stack[-1][1].children[-1] if stack and stack[-1][1].children else None
                if last is not None and parse and cur.level == "I":
                    last.val = (last.val or "") + "\n" + line.rstrip("\n")
                elif cur.level != "I":
                    cur.text.append(line.strip())
                continue
            if b is None or cur is None or b.group(1) != cur.level.lower():
                if n_records == 0 and cur is None:
                    raise ProfileError(f"{p}: line {no}: not a cuDNN API log (expected a line like "
                                       f"'I! CuDNN (v91900) function cudnnCreate() called:')")
                raise ProfileError(f"{p}: line {no}: unexpected text {line[:60]!r}: malformed cuDNN log")
            body = b.group(2)
            stripped = body.lstrip(" ")
            if stripped.startswith("Time: "):
                cur.time = stripped[6:].split(" ")[0]
                continue
            if stripped.startswith("Process="):
                m2 = re.search(r"Thread=(\d+)", stripped)
                cur.thread = m2.group(1) if m2 else "?"
                continue
            if cur.level != "I":
                cur.text.append(stripped)
                continue
            if cur.first_field is None:
                cur.first_field = stripped.partition(":")[0]
            if not parse:
                continue
            indent = len(body) - len(stripped)
            name, typ, val, nested = _parse_field(stripped)
            f = Field(name, typ, val)
            while len(stack) > 1 and stack[-1][0] >= indent:
                stack.pop()
            stack[-1][1].children.append(f)
            if nested:
                stack.append((indent, f))
        self.lines = src.count
        if cur is not None:
            if cur.time is None or cur.thread is None:
                self.truncated = True  # partial last record: dropped
            else:
                n_records += 1
                yield cur
        self.truncated = self.truncated or src.cut
        if n_records == 0:
            if src.count:
                raise ProfileError(f"{p}: line 1: not a cuDNN API log (no complete record)")
            raise ProfileError(f"{p}: empty file: not a cuDNN API log")


def _tensor(f: Field | None) -> tuple[tuple[int, ...], tuple[int, ...], str | None]:
    if f is None:
        return (), (), None
    dims = f.get("dimA")
    strides = f.get("strideA")
    dt = f.get("type") or f.get("dataType")
    return _ints(dims.val if dims else None), _ints(strides.val if strides else None), _enum(dt.val) if dt else None


def _knobs(f: Field | None) -> tuple[tuple[str, int], ...]:
    if f is None:
        return ()
    out = []
    for c in f.children:
        if c.name.startswith("CUDNN_KNOB_TYPE_"):
            v = _int(c.val)
            if v is not None:
                out.append((c.name[len("CUDNN_KNOB_TYPE_"):], v))
    return tuple(out)


def _conv_params(cd: Field | None) -> tuple[tuple, tuple, tuple, int, str | None, str | None]:
    if cd is None:
        return (), (), (), 1, None, None
    pads = _ints(cd.get("padA").val) if cd.get("padA") else ()
    lower, upper = cd.get("lowerPadA"), cd.get("upperPadA")
    if lower is not None:
        lo = _ints(lower.val)
        up = _ints(upper.val) if upper is not None else lo
        pads = lo + up  # ONNX order: begins then ends
    elif pads:
        pads = pads + pads
    strides = _ints(cd.get("strideA").val) if cd.get("strideA") else ()
    dil = _ints(cd.get("dilationA").val) if cd.get("dilationA") else ()
    g = cd.get("groupCount")
    groups = _int(g.val) if g is not None else 1
    ct = cd.get("computeType") or cd.get("dataType")
    mt = cd.get("mathType")
    return pads, strides, dil, groups or 1, _enum(ct.val) if ct else None, _enum(mt.val) if mt else None


def _graph_execution(rec: Record) -> dict:
    plan = rec.root.get("executionPlan")
    ops = []
    if plan is not None:
        for f in plan.find_all("operation"):
            if f.type:
                ops.append(re.sub(r"^CUDNN_BACKEND_OPERATION_|_DESCRIPTOR$", "", f.type))
    eng = plan.find("engine_id") if plan is not None else None
    knobs = _knobs(plan.find("knobDesc")) if plan is not None else ()
    conv = None
    if plan is not None:
        for f in plan.find_all("operation"):
            if f.type and "CONVOLUTION" in f.type:
                conv = f
                break
    return _describe(rec, "graph", tuple(ops), _int(eng.val) if eng else None, knobs, None, conv)


def _slot(holder: Field | None, *names: str) -> Field | None:
    """The first of ``names`` that ``holder`` has (a forward tensor or the gradient in its place)."""
    if holder is None:
        return None
    return next((f for f in (holder.get(n) for n in names) if f is not None), None)


def _describe(rec, api, ops, engine_id, knobs, algorithm, holder: Field | None, tf32=None):
    x, xs, dt = _tensor(_slot(holder, "xDesc", "dxDesc"))
    w, _, wdt = _tensor(_slot(holder, "wDesc", "dwDesc"))
    y, ys, _ = _tensor(_slot(holder, "yDesc", "dyDesc"))
    pads, strides, dil, groups, ct, mt = _conv_params(holder.get("convDesc") if holder else None)
    if len(x) > 1 and len(w) > 1 and w[1] > 0 and x[1] % w[1] == 0:
        groups = x[1] // w[1]  # the graph API's convolution descriptor has no group count
    ws = rec.root.get("workSpaceSizeInBytes")
    return dict(api=api, line=rec.line, time=rec.time, operations=ops, engine_id=engine_id, knobs=knobs,
                algorithm=algorithm, x=x, w=w, y=y, x_strides=xs, y_strides=ys, pads=pads, strides=strides,
                dilations=dil, groups=groups, data_type=dt or wdt, compute_type=ct, math_type=mt, tf32=tf32,
                workspace_bytes=_int(ws.val) if ws is not None else None, status=None)


def read_cudnn_log(path: str | os.PathLike) -> CudnnLog:
    """Parse a cuDNN API log (``CUDNN_LOGLEVEL_DBG=3``; text or gzip) into a :class:`CudnnLog`.

    Every ``cudnnBackendExecute`` becomes an :class:`Execution` with the engine global index and
    knob choices of its plan (completed from the ``cudnnBackendExecuteInternal`` record that
    follows it on the same thread), and every legacy compute call (:data:`LEGACY_CALLS`) one with
    its algorithm. Raises :class:`ProfileError` naming the file and line for malformed input.
    """
    p = Path(path)
    reader = RecordReader(p, {"cudnnBackendExecute", "cudnnBackendExecuteInternal", *LEGACY_CALLS})
    execs: list[dict] = []
    calls: dict[str, int] = {}
    warnings, errors = [], []
    version = None
    pending: dict[str | None, dict] = {}  # thread -> graph execution awaiting its internal record / status
    for rec in reader:
        if version is None:
            version = rec.version
        if rec.level == "W":
            warnings.append(f"line {rec.line}: {rec.function}: {_first_text(rec)}")
            continue
        if rec.level == "E":
            errors.append(f"line {rec.line}: {rec.function}: {_first_text(rec)}")
            continue
        if rec.is_exit:
            if rec.function == "cudnnBackendExecute" or rec.function in LEGACY_CALLS:
                d = pending.pop(rec.thread, None)
                if d is not None:
                    d["status"] = rec.status
            continue
        calls[rec.function] = calls.get(rec.function, 0) + 1
        if rec.function == "cudnnBackendExecute":
            d = _graph_execution(rec)
            execs.append(d)
            pending[rec.thread] = d
        elif rec.function == "cudnnBackendExecuteInternal":
            d = pending.get(rec.thread)
            if d is None:
                continue
            tf = rec.root.get("enable_tf32")
            if tf is not None and tf.val is not None:
                d["tf32"] = tf.val.strip().lower() == "true"
            op = rec.root.get("operation")
            if not d["operations"] and op is not None and op.val:
                d["operations"] = (op.val.strip(),)
            if d["engine_id"] is None:
                eng = rec.root.get("engine_id")
                d["engine_id"] = _int(eng.val) if eng is not None else None
                d["knobs"] = _knobs(rec.root.get("knobDesc"))
            if not d["x"]:
                d.update({k: v for k, v in _describe(rec, "graph", (), None, (), None, rec.root).items()
                          if k in ("x", "w", "y", "x_strides", "y_strides", "pads", "strides", "dilations",
                                   "groups", "data_type", "compute_type")})
            mt = rec.root.find("mathType")
            if mt is not None and d["math_type"] is None:
                d["math_type"] = _enum(mt.val)
        elif rec.function in LEGACY_CALLS:
            arg = LEGACY_CALLS[rec.function]
            algo = _enum(rec.root.get(arg).val) if arg and rec.root.get(arg) is not None else None
            kind = rec.function[len("cudnn"):]
            d = _describe(rec, rec.function, (kind,), None, (), algo, rec.root)
            execs.append(d)
            pending[rec.thread] = d
    return CudnnLog(path=str(p), version=version, executions=tuple(Execution(**d) for d in execs),
                    calls=calls, warnings=tuple(warnings), errors=tuple(errors), truncated=reader.truncated,
                    lines=reader.lines)


def _first_text(rec: Record) -> str:
    for t in rec.text:
        t = t.strip()
        if t and not t.startswith("Info: Traceback"):
            return t[:300]
    return rec.text[0][:300] if rec.text else ""
