"""torch.profiler Chrome trace: CPU ops, CUDA runtime calls and GPU kernels, linked.

Source of the format: the JSON that ``torch.profiler.profile(...).export_chrome_trace(path)`` writes
(Kineto's Chrome trace; PyTorch 2.x, checked on PyTorch 2.11's trace in ``shared/samples``). Events
are ``traceEvents`` of phase ``"X"`` (complete) with a category ``cat``:

* ``cpu_op`` (also ``user_annotation``, ``python_function``): an operator on a host thread; with
  ``record_shapes=True`` its ``args["Input Dims"]`` lists the input shapes, and ``args["External id"]``
  identifies it;
* ``cuda_runtime`` / ``cuda_driver``: a CUDA API call (``cudaLaunchKernel``, ``cuLaunchKernel``...),
  with ``args.correlation`` (the CUPTI correlation id of what it launched) and ``args["External id"]``
  (the innermost CPU op that made the call);
* ``kernel``, ``gpu_memset``, ``gpu_memcpy``: GPU activity on ``args.stream``, with the
  ``args.correlation`` of the call that launched it (and that call's ``External id``).

``ts`` and ``dur`` are microseconds; this module stores **milliseconds**, relative to the earliest
event of the trace (``start_ms``), so numbers stay small and exact enough (ns resolution).

Iterations: a CPU op named ``ProfilerStep#N`` (``torch.profiler`` with ``prof.step()``) or
``benanza.iteration`` (what ``benanza profile`` records around each inference) delimits one
iteration; without any, the whole trace is one iteration.

Helpers that need only the trace: :func:`busy_ms` (union of GPU intervals), :func:`launch_gaps`
(idle time between consecutive GPU activities and whether the GPU waited for the host) and
:func:`host_bound_stretches` (runs of consecutive host-bound gaps).
"""
from __future__ import annotations

import bisect
import gzip
import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import ProfileError

#: CPU op names that delimit one iteration, in order of preference
ITERATION_MARKERS = ("benanza.iteration", "ProfilerStep#")

_CPU_CATS = {"cpu_op", "user_annotation", "python_function", "operator", "Operator"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "runtime"}
_GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memset": "memset", "Memset": "memset",
             "gpu_memcpy": "memcpy", "Memcpy": "memcpy"}
#: runtime/driver calls that put work on a stream
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaLaunchCooperativeKernel", "cudaMemsetAsync", "cudaMemcpyAsync", "cudaMemcpy",
                "cudaMemset", "cudaGraphLaunch", "cuGraphLaunch", "cudaMemcpy2DAsync")


@dataclass(frozen=True)
class CpuOp:
    """One host operator (``aten::conv2d``, ``aten::cudnn_convolution``, a ``record_function`` range).

    ``index``: position in the trace's list of CPU ops (sorted by start). ``external_id``: Kineto's
    ``External id`` (None when absent). ``start_ms``/``dur_ms``: ms relative to the trace start.
    ``input_dims``: one entry per input, a tuple of ints for a tensor, ``()`` for a scalar or a
    non-tensor argument (``record_shapes=True`` is needed; empty tuple if not recorded).
    ``parent``: index of the innermost enclosing CPU op on the same thread, None at top level.
    ``sequence``: autograd's sequence number (``args["Sequence number"]``; None when absent): a
    forward op run with gradients on records the number the next autograd node will get
    (``at::sequence_number::peek()``: in PyTorch 2.11's traces every op of the forward, nested ones
    too, so ``aten::conv2d`` and ``aten::convolution`` share one), and the backward node's op
    (``ConvolutionBackward0``) and the ``autograd::engine::evaluate_function: ConvolutionBackward0``
    op around it record the number of the node. ``fwd_thread``: ``args["Fwd thread id"]``: 0 on forward ops, on a backward
    node's op the RecordFunction thread id (``at::RecordFunction::currentThreadId()``, counted from
    1, not the OS thread id) of the thread that ran its forward op (PyTorch's
    ``torch/csrc/autograd/function.h``, ``Node::operator()``; ``profiler_kineto.cpp`` writes both
    only where the sequence number is >= 0).
    """

    index: int
    name: str
    external_id: int | None
    start_ms: float
    dur_ms: float
    thread: str
    input_dims: tuple[tuple[int, ...], ...]
    input_types: tuple[str, ...]
    parent: int | None
    depth: int
    sequence: int | None = None
    fwd_thread: int | None = None

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.dur_ms


@dataclass(frozen=True)
class RuntimeCall:
    """A CUDA runtime or driver API call on a host thread (ms relative to the trace start)."""

    index: int
    name: str
    start_ms: float
    dur_ms: float
    thread: str
    correlation: int | None
    external_id: int | None

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.dur_ms


@dataclass(frozen=True)
class Kernel:
    """One GPU activity: a kernel, a memset or a memcpy (``kind``), on ``stream`` of ``device``.

    ``start_ms``/``dur_ms`` in ms (the trace has µs). ``correlation`` links it to the
    :class:`RuntimeCall` that launched it; ``external_id`` to the CPU op that made that call.
    ``grid``/``block``: launch dimensions (``()`` for memsets/memcpys or when not recorded).
    """

    index: int
    name: str
    kind: str
    start_ms: float
    dur_ms: float
    device: int
    stream: int
    correlation: int | None
    external_id: int | None
    grid: tuple[int, ...] = ()
    block: tuple[int, ...] = ()

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.dur_ms


@dataclass(frozen=True)
class Iteration:
    """One profiled iteration: the host time range of its marker op (ms), and its GPU activities
    (indices into :attr:`Trace.kernels`, in start order)."""

    index: int
    name: str
    start_ms: float
    end_ms: float
    kernels: tuple[int, ...]

    @property
    def dur_ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass(frozen=True)
class Trace:
    """A parsed torch.profiler Chrome trace. Build it with :func:`read_trace`.

    ``cpu_ops``, ``runtime_calls`` and ``kernels`` are sorted by start time. ``base_us`` is the
    absolute timestamp (µs, the trace's clock) that ``start_ms = 0`` stands for. ``device_name`` is
    the GPU from ``deviceProperties`` (None if absent); ``metadata`` the trace's other top-level
    scalars (CUDA driver/runtime versions...).
    """

    path: str
    cpu_ops: tuple[CpuOp, ...]
    runtime_calls: tuple[RuntimeCall, ...]
    kernels: tuple[Kernel, ...]
    iterations: tuple[Iteration, ...]
    base_us: float
    device_name: str | None = None
    metadata: dict = field(default_factory=dict, compare=False, hash=False)
    _by_correlation: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    _by_external: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    # ---------------------------------------------------------------------------------- links

    def launch_of(self, kernel: Kernel) -> RuntimeCall | None:
        """The runtime/driver call that launched ``kernel`` (by correlation id), or None."""
        return self._by_correlation.get(kernel.correlation)

    def op_of(self, kernel: Kernel) -> CpuOp | None:
        """The innermost CPU op that launched ``kernel``: by its ``External id``; failing that, the
        innermost op enclosing the launching runtime call on the same thread; else None."""
        if kernel.external_id is not None:
            op = self._by_external.get(kernel.external_id)
            if op is not None:
                return op
        call = self.launch_of(kernel)
        if call is None:
            return None
        if call.external_id is not None and call.external_id in self._by_external:
            return self._by_external[call.external_id]
        return self.enclosing_op(call.thread, call.start_ms)

    def enclosing_op(self, thread: str, t_ms: float) -> CpuOp | None:
        """The innermost CPU op on ``thread`` whose time range contains ``t_ms``."""
        best = None
        for op in self.cpu_ops:
            if op.start_ms > t_ms:
                break
            if op.thread == thread and op.end_ms >= t_ms and (best is None or op.depth >= best.depth):
                best = op
        return best

    def ancestors(self, op: CpuOp) -> list[CpuOp]:
        """``op`` and its enclosing ops, innermost first."""
        out = [op]
        while out[-1].parent is not None:
            out.append(self.cpu_ops[out[-1].parent])
        return out

    def children(self, op: CpuOp) -> list[CpuOp]:
        """The CPU ops directly inside ``op`` (same thread), in start order."""
        return [o for o in self.cpu_ops if o.parent == op.index]

    def kernels_of(self, iteration: Iteration | None = None) -> list[Kernel]:
        """GPU activities of one iteration (all of the trace if None), in start order."""
        if iteration is None:
            return list(self.kernels)
        return [self.kernels[i] for i in iteration.kernels]


# ----------------------------------------------------------------------------------- reading

def _open_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except OSError as e:
        raise ProfileError(f"{path}: cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise ProfileError(f"{path}: truncated or corrupt gzip data ({e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text at byte {e.start}: not a Chrome trace") from None


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _seq(v) -> int | None:
    """A ``Sequence number`` (an int, or its decimal string in older exports); None when absent or
    negative (-1: no autograd node)."""
    n = _int_or_none(v)
    return n if n is not None and n >= 0 else None


def _dims(v) -> tuple[tuple[int, ...], ...]:
    out = []
    for d in v or []:
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            out.append(tuple(d))
        else:
            out.append(())
    return tuple(out)


def _line_of(text: str, event_index: int) -> int | None:
    """Line number of the ``event_index``-th object of ``traceEvents`` when the trace writes one
    event per line (as Kineto does); None otherwise."""
    start = text.find('"traceEvents"')
    if start < 0:
        return None
    lines = text.count("\n", 0, start) + 1
    pos = text.find("[", start)
    dec = json.JSONDecoder()
    i = 0
    n = len(text)
    pos += 1
    while pos < n:
        while pos < n and text[pos] in " \t\r\n,":
            if text[pos] == "\n":
                lines += 1
            pos += 1
        if pos >= n or text[pos] == "]":
            return None
        if i == event_index:
            return lines
        try:
            _, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        lines += text.count("\n", pos, end)
        pos = end
        i += 1
    return None


def read_trace(path: str | os.PathLike) -> Trace:
    """Parse a torch.profiler Chrome trace (``.json`` or ``.json.gz``) into a :class:`Trace`.

    Raises :class:`ProfileError` (one line naming the file, and the line or event) for a missing
    file, truncated gzip or JSON, a document without ``traceEvents``, or an event of a known
    category without a numeric ``ts``/``dur``. Events of other categories are ignored.
    """
    p = Path(path)
    text, events, meta = _load_events(p)
    cpu_raw, rt_raw, gpu_raw = _split_events(p, text, events)
    if not cpu_raw and not gpu_raw:
        raise ProfileError(f"{p}: the trace has no CPU ops and no GPU kernels "
                           f"(was torch.profiler run with activities=[CPU, CUDA]?)")
    base = min(t for t, *_ in cpu_raw + rt_raw + gpu_raw)
    cpu_ops = _cpu_ops(cpu_raw, base)
    calls = _runtime_calls(rt_raw, base)
    kernels = _kernels(gpu_raw, base)
    by_corr = {c.correlation: c for c in calls if c.correlation is not None}
    by_ext: dict[int, CpuOp] = {}
    for op in cpu_ops:
        if op.external_id is not None:
            # the innermost op wins when ids repeat (they should not)
            prev = by_ext.get(op.external_id)
            if prev is None or op.depth >= prev.depth:
                by_ext[op.external_id] = op

    dev = meta.get("deviceProperties") if isinstance(meta, dict) else None
    device_name = dev[0].get("name") if isinstance(dev, list) and dev and isinstance(dev[0], dict) else None
    metadata = {k: v for k, v in (meta.items() if isinstance(meta, dict) else ())
                if isinstance(v, (str, int, float)) and k != "traceEvents"}
    trace = Trace(path=str(p), cpu_ops=tuple(cpu_ops), runtime_calls=calls, kernels=tuple(kernels),
                  iterations=(), base_us=base, device_name=device_name, metadata=metadata,
                  _by_correlation=by_corr, _by_external=by_ext)
    object.__setattr__(trace, "iterations", _iterations(trace))
    return trace


def _load_events(p: Path) -> tuple[str, list, dict]:
    """The trace file's text, its events and the document around them (``{}`` for a bare list of
    events). Raises :class:`ProfileError` for truncated or malformed JSON or no ``traceEvents`` list."""
    text = _open_text(p)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        what = "truncated" if e.pos >= len(text.rstrip()) - 1 else "malformed"
        raise ProfileError(f"{p}: line {e.lineno} column {e.colno}: {what} JSON ({e.msg}); "
                           f"not a complete Chrome trace") from None
    if isinstance(doc, list):
        return text, doc, {}
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return text, doc["traceEvents"], doc
    raise ProfileError(f"{p}: no traceEvents list: not a torch.profiler Chrome trace")


def _split_events(p: Path, text: str, events: list) -> tuple[list, list, list]:
    """The complete (``ph`` "X") events of the CPU, runtime and GPU categories, each as
    ``(ts_us, dur_us, event, args)``, in trace order. Raises :class:`ProfileError` for an event that
    is not an object, or one of these categories without a finite ``ts`` and non-negative ``dur``."""
    cpu_raw, rt_raw, gpu_raw = [], [], []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise ProfileError(_where(p, text, i, "an event is not a JSON object"))
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in _CPU_CATS:
            bucket = cpu_raw
        elif cat in _RUNTIME_CATS:
            bucket = rt_raw
        elif cat in _GPU_CATS:
            bucket = gpu_raw
        else:
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or \
                not math.isfinite(ts) or not math.isfinite(dur) or dur < 0:
            raise ProfileError(_where(p, text, i, f"{cat} event {str(e.get('name'))[:60]!r} has no valid "
                                                  f"numeric ts/dur (got ts={ts!r}, dur={dur!r})"))
        args = e.get("args")
        if args is not None and not isinstance(args, dict):
            raise ProfileError(_where(p, text, i, f"{cat} event args is not an object"))
        bucket.append((float(ts), float(dur), e, args or {}))
    return cpu_raw, rt_raw, gpu_raw


def _rel_ms(ts_us: float, base_us: float) -> float:
    """A trace time (µs) in ms relative to the trace's earliest event ``base_us``."""
    return (ts_us - base_us) / 1000.0


def _cpu_ops(cpu_raw: list, base: float) -> list[CpuOp]:
    """The CPU ops sorted by (start, -duration), so that parents come before their children, each
    with its enclosing op on the same thread (``parent``) and its nesting ``depth``."""
    cpu_raw.sort(key=lambda r: (r[0], -r[1]))
    cpu_ops: list[CpuOp] = []
    stacks: dict[str, list[int]] = {}
    for ts, dur, e, args in cpu_raw:
        thread = f"{e.get('pid')}/{e.get('tid')}"
        st = stacks.setdefault(thread, [])
        while st and cpu_ops[st[-1]].end_ms < _rel_ms(ts, base) - 1e-9:
            st.pop()
        parent = st[-1] if st else None
        op = CpuOp(index=len(cpu_ops), name=str(e.get("name", "")), external_id=_int_or_none(args.get("External id")),
                   start_ms=_rel_ms(ts, base), dur_ms=dur / 1000.0, thread=thread,
                   input_dims=_dims(args.get("Input Dims")),
                   input_types=tuple(str(t) for t in args.get("Input type") or ()),
                   parent=parent, depth=len(st), sequence=_seq(args.get("Sequence number")),
                   fwd_thread=_int_or_none(args.get("Fwd thread id")))
        cpu_ops.append(op)
        st.append(op.index)
    return cpu_ops


def _runtime_calls(rt_raw: list, base: float) -> tuple[RuntimeCall, ...]:
    """The CUDA runtime/driver calls, sorted by start."""
    rt_raw.sort(key=lambda r: r[0])
    return tuple(RuntimeCall(index=i, name=str(e.get("name", "")), start_ms=_rel_ms(ts, base), dur_ms=dur / 1000.0,
                             thread=f"{e.get('pid')}/{e.get('tid')}",
                             correlation=_int_or_none(args.get("correlation")),
                             external_id=_int_or_none(args.get("External id")))
                 for i, (ts, dur, e, args) in enumerate(rt_raw))


def _kernels(gpu_raw: list, base: float) -> list[Kernel]:
    """The GPU kernels, memsets and memcpys, sorted by start (stream: ``args.stream``, else the
    event's ``tid``)."""
    gpu_raw.sort(key=lambda r: r[0])
    kernels = []
    for ts, dur, e, args in gpu_raw:
        kernels.append(Kernel(index=len(kernels), name=str(e.get("name", "")), kind=_GPU_CATS[e["cat"]],
                              start_ms=_rel_ms(ts, base), dur_ms=dur / 1000.0,
                              device=_int_or_none(args.get("device")) or 0,
                              stream=_int_or_none(args.get("stream")) if args.get("stream") is not None
                              else _int_or_none(e.get("tid")) or 0,
                              correlation=_int_or_none(args.get("correlation")),
                              external_id=_int_or_none(args.get("External id")),
                              grid=tuple(args.get("grid") or ()), block=tuple(args.get("block") or ())))
    return kernels


def _where(p: Path, text: str, i: int, msg: str) -> str:
    line = _line_of(text, i)
    return f"{p}: {'line ' + str(line) if line else 'event ' + str(i)}: {msg}"


def _iterations(trace: Trace) -> tuple[Iteration, ...]:
    marks = []
    for marker in ITERATION_MARKERS:
        marks = [op for op in trace.cpu_ops if op.name == marker or
                 (marker.endswith("#") and op.name.startswith(marker))]
        if marks:
            break
    if marks:
        ranges = [(op.name, op.start_ms, op.end_ms) for op in marks]
    else:
        ts = [o.start_ms for o in trace.cpu_ops] + [k.start_ms for k in trace.kernels]
        te = [o.end_ms for o in trace.cpu_ops] + [k.end_ms for k in trace.kernels]
        ranges = [("trace", min(ts), max(te))]
    starts = [r[1] for r in ranges]
    members: list[list[int]] = [[] for _ in ranges]
    for k in trace.kernels:
        call = trace.launch_of(k)
        t = call.start_ms if call is not None else k.start_ms
        j = bisect.bisect_right(starts, t) - 1
        if j < 0:
            continue
        if call is not None and t > ranges[j][2]:
            continue  # launched between iterations: belongs to none
        members[j].append(k.index)
    return tuple(Iteration(index=i, name=r[0], start_ms=r[1], end_ms=r[2], kernels=tuple(m))
                 for i, (r, m) in enumerate(zip(ranges, members)))


# ----------------------------------------------------------------------------- trace helpers

def busy_ms(kernels: list[Kernel]) -> float:
    """Time (ms) during which at least one of ``kernels`` ran: the union of their intervals, so
    concurrent kernels on several streams count once."""
    total = 0.0
    cur_s = cur_e = None
    for k in sorted(kernels, key=lambda k: k.start_ms):
        if cur_e is None or k.start_ms > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = k.start_ms, k.end_ms
        else:
            cur_e = max(cur_e, k.end_ms)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


@dataclass(frozen=True)
class LaunchGap:
    """GPU idle time between two consecutive GPU activities (all streams merged).

    ``before``/``after``: kernel indices; ``start_ms``: when the GPU went idle; ``gap_ms``: how long.
    ``host_bound``: True when the call that launched ``after`` started only after ``before`` had
    finished, so the GPU waited for the host (launch overhead, Python, framework bookkeeping);
    False when the work was already queued (a dependency or synchronization kept it idle).
    ``launch_to_start_ms``: from the start of that launch call to the start of ``after``.
    """

    before: int
    after: int
    start_ms: float
    gap_ms: float
    host_bound: bool
    launch_to_start_ms: float | None


def launch_gaps(trace: Trace, iteration: Iteration | None = None, min_gap_ms: float = 0.0) -> list[LaunchGap]:
    """The idle gaps of at least ``min_gap_ms`` between consecutive GPU activities of one
    iteration (or the whole trace), in time order. Overlapping activities leave no gap."""
    ks = sorted(trace.kernels_of(iteration), key=lambda k: k.start_ms)
    out: list[LaunchGap] = []
    end = None
    last = None
    for k in ks:
        if last is not None and k.start_ms > end:
            gap = k.start_ms - end
            if gap >= min_gap_ms:
                call = trace.launch_of(k)
                hb = call is not None and call.start_ms >= end
                out.append(LaunchGap(before=last.index, after=k.index, start_ms=end, gap_ms=gap, host_bound=hb,
                                     launch_to_start_ms=(k.start_ms - call.start_ms) if call else None))
        if end is None or k.end_ms > end:
            end = k.end_ms
            last = k
    return out


@dataclass(frozen=True)
class HostBoundStretch:
    """A run of consecutive host-bound gaps: the GPU kept finishing work before the host had
    launched the next. ``first``/``last``: kernel indices bounding the stretch; ``idle_ms``: the
    summed gaps; ``span_ms``: from the end of the first kernel's predecessor gap to the start of
    the last kernel; ``gaps``: how many gaps; ``ops``: the CPU ops (outermost names) that launched
    the kernels after each gap, in order, without repeats in a row."""

    first: int
    last: int
    start_ms: float
    span_ms: float
    idle_ms: float
    gaps: int
    ops: tuple[str, ...]


def host_bound_stretches(trace: Trace, iteration: Iteration | None = None, min_idle_ms: float = 0.0,
                         min_gaps: int = 2, max_busy_ms: float = 0.020) -> list[HostBoundStretch]:
    """Stretches where the GPU waited for the host: maximal runs of host-bound :func:`launch_gaps`
    separated by GPU work no longer than ``max_busy_ms`` (ms), with at least ``min_gaps`` gaps and
    ``min_idle_ms`` of idle time. Returns them in time order."""
    gaps = launch_gaps(trace, iteration)
    out: list[HostBoundStretch] = []
    run: list[LaunchGap] = []

    def close():
        if len(run) >= min_gaps:
            idle = sum(g.gap_ms for g in run)
            if idle >= min_idle_ms:
                ops: list[str] = []
                for g in run:
                    op = trace.op_of(trace.kernels[g.after])
                    name = trace.ancestors(op)[-1].name if op is not None else "?"
                    if not ops or ops[-1] != name:
                        ops.append(name)
                k_last = trace.kernels[run[-1].after]
                out.append(HostBoundStretch(first=run[0].before, last=run[-1].after, start_ms=run[0].start_ms,
                                            span_ms=k_last.start_ms - run[0].start_ms, idle_ms=idle,
                                            gaps=len(run), ops=tuple(ops)))
        run.clear()

    for g in gaps:
        if not g.host_bound:
            close()
            continue
        if run:
            busy = g.start_ms - trace.kernels[run[-1].after].start_ms
            if busy > max_busy_ms:
                close()
        run.append(g)
    close()
    return out
