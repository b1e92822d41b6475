"""The join: each framework GPU kernel to the ONNX layer it implements, or to what it is instead.

Inputs: a :class:`~benanza.profiles.trace.Trace` and the model's layer graph
(:func:`benanza.processing.model.process` at the profiled batch size). Per iteration:

1. **Framework ops.** Each kernel is attached to the CPU op that launched it (``External id`` of
   the kernel / of its runtime call, see :meth:`Trace.op_of`); its *framework op* is the outermost
   ``aten::``-style op enclosing that op (``aten::conv2d`` for a kernel launched by
   ``aten::cudnn_convolution``). Framework ops are taken in execution order, with the input shapes
   the profiler recorded (``record_shapes=True``).
2. **Ops to layers.** Each framework op whose name maps to ONNX op types (:data:`ATEN_TO_ONNX`)
   is matched to an unmatched layer of one of those types whose activation input shape is among
   the op's input shapes. Among several candidates (identical blocks), layers whose producers are
   already matched come first, then the one whose producer was matched most recently (data flow),
   then graph order. Framework ops without a layer and layers without an op are kept as such.
3. **Kernels.** Each kernel gets a category (:data:`CATEGORIES`): ``layer`` (it computes the layer
   its framework op matched), ``layout`` (a layout conversion, e.g. cuDNN's ``nchwToNhwcKernel``
   around an NHWC engine), ``copy``, ``fill`` (memsets, fills, workspace initialization),
   ``unfused_batch_norm`` (a batch norm the framework ran where the model has none: BN folded in
   the model, not in the framework), or ``other`` (a framework op that matches no layer). The
   ``library`` that the kernel comes from is read from its name (cuDNN, cuBLAS/cuBLASLt,
   PyTorch native, Triton), the ``api`` the framework called from the op chain.

**Module scopes** (profiles of the native module, ``benanza torch``): the trace then has a
``record_function("benanza.module:NAME")`` around every submodule's forward, and the export's
nodes name the module they came from (:func:`benanza.processing.modules.module_paths`). Given both, step 2
prefers, among the candidates, the layers whose module shares the longest qualified-name prefix
with the op's innermost scope (a folded Conv+BatchNorm carries the batch norm's module, a sibling
of the convolution's), and a second pass gives each framework op that matched no layer but
launched compute kernels inside a scope (e.g. ``aten::_native_multi_head_attention``, one op for
the whole of nn.MultiheadAttention; ``aten::scaled_dot_product_attention`` for the MatMul,
Softmax, MatMul of the export) to the **group** of the still unmatched layers of that very module
(not of its submodules, which ran in their own scopes): its kernels count for the group's first
layer, which *covers* the others (:attr:`JoinResult.covers`). Likewise a MatMul matched by an op
with a bias epilogue (``aten::linear``) covers the bias Add of its fusion candidate.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from benanza import kinds as L
from benanza.profiles.trace import CpuOp, Iteration, Kernel, Trace

#: kernel categories of the join
CATEGORIES = ("layer", "layout", "copy", "fill", "unfused_batch_norm", "other")

#: framework (PyTorch ATen) op name -> the ONNX op types it can implement
ATEN_TO_ONNX: dict[str, tuple[str, ...]] = {}


def _reg(onnx_ops: str, *aten: str) -> None:
    for a in aten:
        ATEN_TO_ONNX[a] = ATEN_TO_ONNX.get(a, ()) + tuple(onnx_ops.split())


for _kind in L.REGISTRY.values():
    for _op, _aten in _kind.aten.items():
        _reg(_op, *_aten)
    for _op, _aten in {op: c.aten for (_, op), c in reversed(_kind.contrib.items())}.items():  # one per op name
        _reg(_op, *_aten)
# ONNX ops no layer kind maps (zero-cost views, and ops benanza does not benchmark)
_reg("ConvTranspose", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
_reg("Flatten", "aten::flatten")
_reg("Reshape", "aten::reshape", "aten::view", "aten::_unsafe_view")
_reg("Squeeze", "aten::squeeze", "aten::squeeze_")
_reg("Unsqueeze", "aten::unsqueeze", "aten::unsqueeze_")
_reg("Identity", "aten::clone")

#: ops that are batch norms (their kernels are "unfused_batch_norm" when no layer matched)
BATCH_NORM_OPS = {a for a, o in ATEN_TO_ONNX.items() if "BatchNormalization" in o}

_LAYOUT = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|NchwToNhwc|NhwcToNchw|convertTensor|"
                     r"transpose_readWrite|tensorTransform|permute_kernel|layout_transform", re.I)
_FILL = re.compile(r"FillFunctor|fill_kernel|memset|init_device_workspace|init_workspace|zero_kernel", re.I)
_COPY = re.compile(r"copy|Memcpy|CatArray|_to_copy", re.I)


@dataclass(frozen=True)
class OpMatch:
    """A framework op of one iteration and the layer it was matched to (None: no layer).

    ``op``: index into :attr:`Trace.cpu_ops`; ``name``: its name (``aten::conv2d``);
    ``input_dims``: the shapes it recorded; ``kernels``: indices of the GPU activities it launched.
    """

    iteration: int
    op: int
    name: str
    input_dims: tuple[tuple[int, ...], ...]
    layer: int | None
    kernels: tuple[int, ...]


@dataclass(frozen=True)
class KernelJoin:
    """What one GPU activity of the trace is.

    ``kernel``: index into :attr:`Trace.kernels`; ``category``: one of :data:`CATEGORIES`;
    ``layer``: the layer whose framework op launched it (for ``layer``, the layer it computes; for
    ``layout``/``fill``/``copy`` inside a layer's op, the layer it serves; None otherwise);
    ``op``: the framework op name (None if it has no CPU op); ``library``: ``cudnn``, ``cublas``
    (cuBLAS/cuBLASLt, also when cuDNN's engine calls cuBLASLt), ``native`` (PyTorch's own
    kernels), ``triton``, ``memset``/``memcpy``, or ``unknown``; ``api``: the library the
    framework called (``cudnn``, ``cublas``, None for native ops); ``dur_ms``: kernel time (ms);
    ``iteration``: which profiled iteration (None: outside every iteration); ``role``: what a
    kernel does when its name tells more than its category (``NCHW->NHWC``, ``NHWC->NCHW``,
    ``split-K reduction``, ``workspace init``), else ``""``.
    """

    kernel: int
    name: str
    category: str
    layer: int | None
    op: str | None
    library: str
    api: str | None
    dur_ms: float
    iteration: int | None
    role: str = ""


@dataclass(frozen=True)
class JoinResult:
    """The join of one trace with one model: ``ops`` (every framework op per iteration with its
    layer), ``kernels`` (every GPU activity's :class:`KernelJoin`, in trace order), per
    iteration the layers that matched no framework op (``unmatched_layers``), and ``covers``:
    for a framework op that computes a group of layers (module scopes), the group's first layer ->
    every layer of the group (first iteration's groups; empty without scopes)."""

    ops: tuple[OpMatch, ...]
    kernels: tuple[KernelJoin, ...]
    unmatched_layers: tuple[tuple[int, ...], ...]
    iterations: int
    covers: dict = None  # group anchor layer -> the layers its framework op computes (module scopes)


# ----------------------------------------------------------------------------------- framework ops

def _is_framework_op(op: CpuOp) -> bool:
    return "::" in op.name


def framework_op(trace: Trace, op: CpuOp | None) -> CpuOp | None:
    """The outermost framework (``ns::name``) op enclosing ``op`` (``op`` itself if none)."""
    if op is None:
        return None
    best = None
    for a in trace.ancestors(op):
        if _is_framework_op(a):
            best = a
    return best if best is not None else op


def kernel_library(name: str, kind: str = "kernel") -> str:
    """Which library a kernel comes from, by its name (``cudnn``, ``cublas``, ``native``,
    ``triton``, ``memset``, ``memcpy``, ``unknown``)."""
    if kind in ("memset", "memcpy"):
        return kind
    n = name
    if "cublas" in n.lower() or "gemvx" in n or "gemv2" in n or "gemmSN" in n or re.search(r"cutlass_\d+_\w*gemm", n):
        return "cublas"
    if "cudnn" in n.lower() or "xmma" in n or "cask" in n:
        return "cudnn"
    if n.startswith("triton_") or "triton" in n:
        return "triton"
    if "at::native" in n or "at::" in n or "c10::" in n:
        return "native"
    if re.search(r"cutlass|sm\d+_xmma|gemm", n):
        return "cublas"
    return "unknown"


def _api(trace: Trace, op: CpuOp | None) -> str | None:
    if op is None:
        return None
    for a in trace.ancestors(op):
        n = a.name
        if "cudnn" in n:
            return "cudnn"
        if n in ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm",
                 "aten::addmv", "aten::mv", "aten::_addmm_activation"):
            return "cublas"
    return None


_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Concat", "MatMul"}


def _shape_ok(layer, dims: tuple[tuple[int, ...], ...]) -> bool:
    """Whether the op's recorded input shapes contain the layer's activation input shape (its
    first input; any input for elementwise ops, whose constant operand may come first). Weights
    are not compared: a framework may store them transposed. Without recorded shapes
    (``record_shapes=False``) every op fits and the order alone decides."""
    shapes = [tuple(s) for s in layer.input_shapes if s]
    if not shapes:
        return True
    have = {tuple(d) for d in dims if d}
    if not have:
        return True
    wants = shapes if layer.op_type in _ELEMENTWISE else shapes[:1]
    for want in wants:
        if want in have:
            return True
        # a framework may flatten leading dims (linear on (N, T, C) -> addmm on (N*T, C))
        if len(want) > 2 and (math.prod(want[:-1]), want[-1]) in have:
            return True
    return False


#: framework ops that only move, allocate or fill memory: never given a scope's group of layers
HELPER_OPS = {"aten::copy_", "aten::contiguous", "aten::clone", "aten::to", "aten::_to_copy", "aten::fill_",
              "aten::zero_", "aten::zeros", "aten::zeros_like", "aten::empty", "aten::empty_like", "aten::ones",
              "aten::ones_like", "aten::full", "aten::new_zeros", "aten::new_ones", "aten::new_empty",
              "aten::arange", "aten::empty_strided", "aten::resize_", "aten::lift_fresh", "aten::detach"}


#: framework ops that add the bias in the GEMM's epilogue (one cuBLASLt kernel for MatMul + Add)
BIAS_EPILOGUE_OPS = {"aten::linear", "aten::addmm", "aten::_addmm_activation", "aten::baddbmm"}


def _cover_bias(ml, layer: int, matched: dict, order: int, covers: dict) -> None:
    """A MatMul matched by an op with a bias epilogue also computes its fusion candidate's bias Add
    (the export's MatMul -> Add of a Linear on 3-D inputs): that Add is covered by the MatMul."""
    f = ml.layers[layer].fusion
    if f is None:
        return
    adds = [i for i in ml.fusions[f].layers if i != layer and ml.layers[i].op_type == "Add" and i not in matched
            and layer in ml.edges.get(i, ())]
    for i in adds:
        matched[i] = order
    if adds:
        covers[layer] = (layer, *adds)


#: framework ops that run every call of the ONNX node they match (``torch.einsum``: its permute copies,
#: sums and its ``bmm``, aten/src/ATen/native/Linear.cpp)
NODE_OPS = {"aten::einsum"}


def _cover_parts(ml, layer: int, matched: dict, order: int, covers: dict) -> None:
    """A framework op of :data:`NODE_OPS` matched to the first layer of a node of several calls (one
    layer per call, each reading the tensor the one before wrote, ``processing.model._part_layers``)
    also computes the node's later layers (the Transposes and the GEMM an Einsum became): covered."""
    from benanza.processing.model import PART_TENSOR

    ly, j = ml.layers, layer
    while j + 1 < len(ly) and j + 1 not in matched and ly[j + 1].op_type == ly[layer].op_type \
            and ly[j + 1].name == ly[layer].name and ly[j].outputs and PART_TENSOR in ly[j].outputs[0] \
            and ly[j + 1].inputs == ly[j].outputs[:1]:
        j += 1
        matched[j] = order
    if j > layer:
        covers[layer] = tuple(range(layer, j + 1))


def scope_of(trace: Trace, op: CpuOp | None) -> str | None:
    """The qualified name of the innermost module scope (``benanza.module:NAME``) around ``op``,
    None outside every scope (or in a trace without scopes)."""
    from benanza.processing.modules import SCOPE_PREFIX

    if op is None:
        return None
    for a in trace.ancestors(op):
        if a.name.startswith(SCOPE_PREFIX):
            return a.name[len(SCOPE_PREFIX):]
    return None


def _common(a: str | None, b: str | None) -> int:
    """Components two qualified module names share from the start (0 when either is unknown)."""
    if not a or not b:
        return 0
    n = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        n += 1
    return n


def _in_scope(path: str | None, scope: str) -> bool:
    return path is not None and (path == scope or path.startswith(scope + "."))


def _group_pass(trace: Trace, ml, paths: dict, out: list, op_layer: dict, matched: dict,
                covers: dict) -> None:
    """Second pass (module scopes): framework ops that matched no layer but launched kernels in a
    scope get that scope's unmatched computing layers as one group (module doc)."""
    groups: dict[str, int] = {}
    for i, om in enumerate(out):
        if om.layer is not None or not om.kernels or om.name in HELPER_OPS:
            continue
        scope = scope_of(trace, trace.cpu_ops[om.op])
        if not scope:
            continue
        if scope not in groups:
            # the scope's own layers (not its submodules': those ran inside their own scopes)
            members = [ly.index for ly in ml.layers if ly.index not in matched and ly.status != "zero_cost"
                       and paths.get(ly.index) == scope]
            if not members:
                continue
            groups[scope] = members[0]
            for m in members:
                matched[m] = len(out) + i
            covers.setdefault(members[0], tuple(members))
        anchor = groups[scope]
        op_layer[om.op] = anchor
        out[i] = OpMatch(iteration=om.iteration, op=om.op, name=om.name, input_dims=om.input_dims, layer=anchor,
                         kernels=om.kernels)


def _iteration_ops(trace: Trace, it: Iteration) -> tuple[list[CpuOp], dict[int, list[int]]]:
    """The framework ops of one iteration, in execution order (outermost framework ops inside the
    iteration's range, on the threads that launched its kernels; the main thread when none), and
    the kernels each launched (framework-op index -> kernel indices)."""
    kernels = trace.kernels_of(it)
    by_fop: dict[int, list[int]] = {}
    threads = set()
    for k in kernels:
        fop = framework_op(trace, trace.op_of(k))
        if fop is not None:
            by_fop.setdefault(fop.index, []).append(k.index)
            threads.add(fop.thread)
    fops = []
    for op in trace.cpu_ops:
        if op.start_ms < it.start_ms or op.start_ms > it.end_ms or not _is_framework_op(op):
            continue
        if threads and op.thread not in threads:
            continue
        if framework_op(trace, op) is not op:
            continue
        fops.append(op)
    return fops, by_fop


def _signature(trace: Trace, fops: list[CpuOp], by_fop: dict, scoped: bool) -> tuple:
    """What the matching of an iteration's ops depends on, op by op: name, input shapes, module scope
    and whether it launched kernels. Two iterations of one signature match alike (the matching reads
    nothing else of the trace)."""
    return tuple((op.name, _frozen(op.input_dims), scope_of(trace, op) if scoped else None,
                  bool(by_fop.get(op.index))) for op in fops)


def _frozen(x):
    """Lists (nested: a tensor list's shapes) as tuples, to compare and hash."""
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def _replay(it: Iteration, fops: list[CpuOp], by_fop: dict, done: list[OpMatch]) -> tuple[list[OpMatch], dict[int, int]]:
    """The matches of an iteration whose ops have the signature of an iteration matched before
    (``done``, op for op): the same layers, this iteration's ops and kernels."""
    out = [OpMatch(iteration=it.index, op=op.index, name=op.name, input_dims=op.input_dims, layer=d.layer,
                   kernels=tuple(by_fop.get(op.index, ()))) for op, d in zip(fops, done)]
    return out, {o.op: o.layer for o in out if o.layer is not None}


def _match_iteration(trace: Trace, it: Iteration, ml, paths: dict | None = None,
                     covers: dict | None = None, ops: tuple | None = None) -> tuple[list[OpMatch], dict[int, int], set[int]]:
    """Match the framework ops of one iteration to layers. Returns the op matches, the map
    framework-op index -> layer index, and the unmatched layer indices. ``paths``: layer index ->
    module name (module scopes, module doc); ``covers`` collects the groups; ``ops``: the
    iteration's :func:`_iteration_ops` when already known."""
    fops, by_fop = ops if ops is not None else _iteration_ops(trace, it)
    layers = ml.layers
    by_type: dict[str, list[int]] = {}
    for ly in layers:
        by_type.setdefault(ly.op_type, []).append(ly.index)
    matched: dict[int, int] = {}  # layer -> order in which it was matched
    op_layer: dict[int, int] = {}
    out: list[OpMatch] = []
    scoped = bool(paths)
    for order, op in enumerate(fops):
        types = ATEN_TO_ONNX.get(op.name, ())
        cands = [i for t in types for i in by_type.get(t, ()) if i not in matched and _shape_ok(layers[i], op.input_dims)]
        layer = None
        scope = scope_of(trace, op) if scoped else None
        if cands:
            def rank(i):
                prods = ml.edges.get(i, [])
                ready = all(p in matched or layers[p].status == "zero_cost" for p in prods)
                recent = max((matched[p] for p in prods if p in matched), default=-1)
                return (-_common(paths.get(i), scope) if scope else 0, 0 if ready else 1, -recent, i)
            layer = min(cands, key=rank)
            matched[layer] = order
            op_layer[op.index] = layer
            if op.name in BIAS_EPILOGUE_OPS and covers is not None:
                _cover_bias(ml, layer, matched, order, covers)
            if op.name in NODE_OPS and covers is not None:
                _cover_parts(ml, layer, matched, order, covers)
        out.append(OpMatch(iteration=it.index, op=op.index, name=op.name, input_dims=op.input_dims, layer=layer,
                           kernels=tuple(by_fop.get(op.index, ()))))
    if scoped:
        _group_pass(trace, ml, paths, out, op_layer, matched, covers if covers is not None else {})
    unmatched = {ly.index for ly in layers} - set(matched)
    return out, op_layer, unmatched


def classify(kernel: Kernel, fop: CpuOp | None, layer: int | None) -> str:
    """The category of ``kernel`` (:data:`CATEGORIES`) given its framework op and that op's layer."""
    n = kernel.name
    if kernel.kind == "memset":
        return "fill"
    if kernel.kind == "memcpy":
        return "copy"
    if _LAYOUT.search(n):
        return "layout"
    if _FILL.search(n):
        return "fill"
    if layer is not None:
        return "layer"
    if fop is not None and fop.name in BATCH_NORM_OPS:
        return "unfused_batch_norm"
    if _COPY.search(n) or (fop is not None and fop.name in ("aten::copy_", "aten::contiguous", "aten::clone",
                                                            "aten::to", "aten::_to_copy")):
        return "copy"
    return "other"


def kernel_role(name: str) -> str:
    """A short description of what a library helper kernel does, from its name ("" if nothing
    more than its category)."""
    n = name.lower()
    if "nchwtonhwc" in n or "nchw2nhwc" in n:
        return "NCHW->NHWC"
    if "nhwctonchw" in n or "nhwc2nchw" in n:
        return "NHWC->NCHW"
    if "splitkreduce" in n or "split_k_reduce" in n or "splitk_reduce" in n:
        return "split-K reduction"
    if "init_device_workspace" in n or "init_workspace" in n:
        return "workspace init"
    return ""


def join(trace: Trace, ml, paths: dict[int, str] | None = None) -> JoinResult:
    """Join every GPU activity of ``trace`` with the layers of ``ml`` (a
    :class:`benanza.processing.model.ModelLayers` at the profiled batch size). ``paths``: layer index ->
    the module it came from (:func:`layer_paths`), for traces with module scopes. Never raises for
    a model that does not fit the trace: then few ops match and the result says so
    (``unmatched_layers``)."""
    ops: list[OpMatch] = []
    op_layer: dict[int, int] = {}
    unmatched = []
    kernel_iter: dict[int, int] = {}
    covers: dict[int, tuple[int, ...]] = {}
    has_scopes = bool(paths) and trace_has_scopes(trace)
    done: dict[tuple, tuple] = {}  # signature -> (matches, unmatched) of an iteration matched before
    for n, it in enumerate(trace.iterations):
        fops, by_fop = _iteration_ops(trace, it)
        sig = _signature(trace, fops, by_fop, has_scopes)
        if sig in done:  # the profiled iterations of a module usually run the same ops: matched once
            o, m = _replay(it, fops, by_fop, done[sig][0])
            u = done[sig][1]
        else:
            o, m, u = _match_iteration(trace, it, ml, paths if has_scopes else None, covers if n == 0 else {},
                                       ops=(fops, by_fop))
            done[sig] = (o, u)
        ops.extend(o)
        op_layer.update(m)
        unmatched.append(tuple(sorted(u)))
        for k in it.kernels:
            kernel_iter[k] = it.index
    kj = []
    for k in trace.kernels:
        op = trace.op_of(k)
        fop = framework_op(trace, op)
        layer = op_layer.get(fop.index) if fop is not None else None
        kj.append(KernelJoin(kernel=k.index, name=k.name, category=classify(k, fop, layer), layer=layer,
                             op=fop.name if fop is not None else None, library=kernel_library(k.name, k.kind),
                             api=_api(trace, op), dur_ms=k.dur_ms, iteration=kernel_iter.get(k.index),
                             role=kernel_role(k.name)))
    return JoinResult(ops=tuple(ops), kernels=tuple(kj), unmatched_layers=tuple(unmatched),
                      iterations=len(trace.iterations), covers=covers)


def trace_has_scopes(trace: Trace) -> bool:
    """Whether the trace has module scopes (``record_function("benanza.module:...")``)."""
    from benanza.processing.modules import SCOPE_PREFIX

    return any(op.name.startswith(SCOPE_PREFIX) for op in trace.cpu_ops)


def layer_paths(ml, model=None) -> dict[int, str]:
    """Layer index -> the module its ONNX node came from (:func:`benanza.processing.modules.module_paths` of
    ``model``, the ONNX file or ModelProto; ``ml.path`` by default). Empty when the export recorded
    no module names."""
    from benanza.processing.modules import module_paths

    try:
        by_node = module_paths(model if model is not None else ml.path)
    except Exception:  # noqa: BLE001 - an unreadable file was reported when ml was built
        return {}
    return {ly.index: by_node[ly.name] for ly in ml.layers if ly.name in by_node}
