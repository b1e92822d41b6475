"""``benanza profile``: run an ONNX model in PyTorch and write a profile folder.

The parent (the CLI, :func:`capture_profile`) starts two child processes of this module
(``python -m benanza.profiles.capture SPEC.json``) so that the libraries read their logging
variables before they load, and so that logging never slows down what is timed:

1. the **log run**: ``CUDNN_LOGLEVEL_DBG=3`` / ``CUDNN_LOGDEST_DBG`` and ``CUBLASLT_LOG_LEVEL=5`` /
   ``CUBLASLT_LOG_FILE`` set; warm-up (cuDNN autotuning when ``cudnn.benchmark`` is on) and a few
   iterations, so the engine each convolution settles on is the one logged most often; one
   iteration is traced to check that the timed run launched the same kernels (a notice in
   profile.json says when not: autotuning may pick differently in two processes);
2. the **timed run**, without logging: warm-up, ``runs`` inferences timed one by one with CUDA
   events (``perf_counter`` on the CPU; both counts stop early for a long step, after at least
   :data:`MIN_WARMUP` and :data:`MIN_RUNS` calls and :data:`WARMUP_BUDGET_S` /
   :data:`TIMED_BUDGET_S` seconds), then ``iterations`` inferences under ``torch.profiler``
   (CPU + CUDA activities, ``record_shapes=True``), each inside ``record_function("benanza.iteration")``
   and followed by a synchronize.

With ``train`` (``benanza torch SPEC --train``), both runs run training iterations instead
(:func:`_train_child`): ``optimizer.zero_grad(set_to_none=True)``, forward, loss,
``loss.backward()``, ``optimizer.step()``, each phase in ``record_function("benanza.phase:NAME")``
(:data:`benanza.spec.PROFILED_STEP_PHASES`) inside the iteration's ``benanza.iteration``; the timed run's latency is
then the step's (CUDA events around one whole step).

The model: the graph is read without external data (``onnx.load(..., load_external_data=False)``);
weights whose data is absent get random values of their shape and type (normal, scaled by
1/sqrt(fan-in); batch-norm variances uniform in [0.5, 1.5) so nothing is NaN); the batch is bound
and shape computations folded (:func:`benanza.processing.model.infer_and_fold`), so the module is specialized
to the batch as a framework's own model is; the graph is converted to a ``torch.fx.GraphModule``
with onnx2torch (extended here: weights reached through ``Identity`` nodes, newer opset versions
whose change only added element types, ``Gelu``, and Reshape/Squeeze/Gather with constant
shapes, axes or indices as modules that keep them as Python ints: onnx2torch's read them back
from the device, one synchronization each). Data types:
``fp32`` turns TF32 off for matmul and cuDNN, ``tf32`` turns it on for both, ``fp16``/``bf16``
cast the model and its inputs.
"""
from __future__ import annotations

import datetime as _dt
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import BenanzaError, DeviceError, ModelError, ProfileError, UsageError
from benanza.spec import FRAMEWORK_DTYPES, OPTIMIZERS as SPEC_OPTIMIZERS, PROFILED_STEP_PHASES


#: ONNX ops whose listed versions changed only the element types they accept (ONNX changelog):
#: onnx2torch's converter of the preceding version serves them unchanged
TYPE_ONLY_VERSIONS = {
    "Reshape": (19, 21), "Transpose": (21,), "Unsqueeze": (21,), "Squeeze": (21,), "Identity": (19, 21),
    "Flatten": (21,), "Shape": (19, 21), "Size": (19, 21), "Constant": (19, 21), "Cast": (19, 21),
    "Equal": (19,), "ConstantOfShape": (20, 21), "Conv": (22,), "MaxPool": (22,), "AveragePool": (22,),
    "GlobalAveragePool": (22,), "GlobalMaxPool": (22,), "Dropout": (22,), "Relu": (22,), "Sigmoid": (22,),
    "Tanh": (22,), "Softmax": (22,), "Erf": (22,), "Pad": (21,), "Where": (16,), "LRN": (22,),
}


@dataclass(frozen=True)
class CaptureSpec:
    """What one child run does. ``role``: ``logs`` or ``timed``; ``model``: ONNX path; ``batch``;
    ``dtype`` (:data:`benanza.spec.FRAMEWORK_DTYPES`); ``device`` (``cuda``, ``cuda:1``, ``cpu``); ``warmup``, ``runs``,
    ``iterations``: counts; ``cudnn_benchmark``; ``dims``/``batch_dim``: as for
    :func:`benanza.processing.model.bind_batch`; ``out``: the folder; ``seed``: for weights and inputs;
    ``channels_last``: run the module and its 4-D inputs in ``torch.channels_last`` memory format
    (NHWC), as a user applies benanza's layout-conversion finding; ``module``: run the native
    PyTorch module instead of the ONNX graph (``benanza torch``): ``{"spec": SPEC, "seq": N,
    "input_shape": [..], "phase": "prefill"|"decode", "kv_len": L, "mla": FORM}`` (:func:`benanza.processing.modules.resolve`) or ``{"pickle": FILE}`` (a module saved
    with ``torch.save`` by :func:`benanza.analyze_module`, with ``inputs``: a saved tuple of example
    tensors and ``batch_dims``), ``model`` then being its ONNX export; ``compile``: a
    ``torch.compile`` mode (``default``, ``reduce-overhead``, ``max-autotune``) or None for eager;
    ``scopes``: open a ``record_function("benanza.module:NAME")`` around every submodule's forward
    during the profiled iterations (the join's module scopes); ``train``: run training iterations
    instead of inferences (:func:`_train_child`: the module in ``train()`` mode, forward, loss,
    ``backward()`` and ``optimizer.step()`` of ``optimizer``, :data:`benanza.spec.OPTIMIZERS`)."""

    role: str
    model: str
    batch: int
    dtype: str
    device: str
    warmup: int
    runs: int
    iterations: int
    cudnn_benchmark: bool
    out: str
    dims: dict
    batch_dim: int | None = None
    seed: int = 0
    channels_last: bool = False
    module: dict | None = None
    compile: str | None = None
    scopes: bool = False
    train: bool = False
    optimizer: str = "sgd"


#: Time limits of a child's warm-up and timed calls (s), each reached only after the fewest calls
#: below: a long step stops there, a short one still makes every call asked for (``--warmup``,
#: ``--runs``). A 2 B-parameter decoder's 2048-token prefill at batch 32 takes 0.71 s a call on an
#: H200 (the LLM truth table, docs/llm.md), so 20 warm-up and 100 timed calls would be
#: 89 s of its profiling child. The kernel times come from the profiled iterations (``iterations``),
#: never limited.
WARMUP_BUDGET_S = 3.0
#: warm-up calls made whatever they take: cuDNN's autotuning (``cudnn.benchmark``) and torch.compile's
#: compilation run in the first call; ``reduce-overhead``'s CUDA graphs are recorded in the second and
#: replayed from the third, later where an autotuner asks for another eager warm-up (PyTorch docs,
#: "CUDAGraph Trees", ``torch.compiler.cudagraph_mark_warmup_incomplete``): two calls to spare
MIN_WARMUP = 5
TIMED_BUDGET_S = 5.0
#: timed calls made whatever they take: the median and quartiles of the latency need them
MIN_RUNS = 10


# -------------------------------------------------------------------------------- the model

def random_weights(model, seed: int = 0) -> list[str]:
    """Give every initializer of ``model`` (an ``onnx.ModelProto``, changed in place) whose data
    is absent random values of its shape and type; return their names.

    Float weights: normal / sqrt(fan-in) (fan-in = product of the dims after the first); inputs 4
    (variance) of BatchNormalization nodes: uniform in [0.5, 1.5); integer tensors: zeros.
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from benanza.processing.model import has_data

    rng = np.random.default_rng(seed)
    variances = {n.input[4] for n in model.graph.node if n.op_type == "BatchNormalization" and len(n.input) > 4}
    filled = []
    for t in model.graph.initializer:
        if has_data(t):
            continue
        shape = tuple(int(d) for d in t.dims)
        try:
            dt = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        except Exception:
            raise ModelError(f"initializer {t.name!r}: element type {t.data_type} has no numpy type") from None
        if np.issubdtype(dt, np.floating):
            if t.name in variances:
                a = rng.uniform(0.5, 1.5, shape)
            else:
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else max(1, shape[0] if shape else 1)
                a = rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))
            a = a.astype(dt)
        else:
            a = np.zeros(shape, dtype=dt)
        t.CopyFrom(numpy_helper.from_array(a, t.name))
        filled.append(t.name)
    return filled


def inline_identity_weights(model) -> int:
    """Replace ``Identity`` nodes of an initializer by an initializer of the output's name (the
    TorchScript exporter writes shared weights so; onnx2torch wants weights as initializers).
    Returns how many were replaced."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    keep, n = [], 0
    for node in g.node:
        if node.op_type == "Identity" and len(node.input) == 1 and node.input[0] in inits:
            t = type(inits[node.input[0]])()
            t.CopyFrom(inits[node.input[0]])
            t.name = node.output[0]
            g.initializer.append(t)
            inits[t.name] = t
            n += 1
        else:
            keep.append(node)
    if n:
        del g.node[:]
        g.node.extend(keep)
    return n


def _extend_onnx2torch() -> None:
    """Register converters onnx2torch lacks or runs slowly, in this order (a later step copies
    what an earlier one registered): ``Reshape`` to a constant shape as a module that keeps the
    shape as Python ints (onnx2torch's reads the shape tensor element by element, a device-to-host
    synchronization each on a GPU), ``Squeeze``/``Gather`` with constant axes or a constant scalar
    index likewise, newer versions of ops whose change only added element types
    (:data:`TYPE_ONLY_VERSIONS`), and ``Gelu`` (opset 20)."""
    from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY as reg

    _register_static_reshape(reg)
    _register_static_squeeze(reg)
    _register_static_gather(reg)
    _register_type_only_versions(reg)
    _register_gelu(reg)


def _register_static_reshape(reg: dict) -> None:
    """``Reshape`` (opsets 5, 13, 14) to a constant shape: a module holding the shape as ints;
    onnx2torch's own converter for any other shape."""
    import torch
    from onnx2torch.node_converters.registry import OperationDescription
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult, get_const_value

    class StaticReshape(torch.nn.Module):
        """ONNX Reshape to a constant shape (0 copies the input's dimension unless allowzero)."""

        def __init__(self, shape: list[int], allowzero: bool):
            super().__init__()
            self.shape = [int(d) for d in shape]
            self.allowzero = allowzero

        def forward(self, x):
            if self.allowzero:
                return torch.reshape(x, self.shape)
            return torch.reshape(x, [x.shape[i] if d == 0 else d for i, d in enumerate(self.shape)])

    for v in (5, 13, 14):
        original = reg.get(OperationDescription("", "Reshape", v))
        if original is None:
            continue

        def reshape(node, graph, _original=original):
            try:
                shape = get_const_value(node.input_values[1], graph)
            except KeyError:
                return _original(node, graph)
            shape = shape.tolist() if hasattr(shape, "tolist") else list(shape)
            return OperationConverterResult(
                torch_module=StaticReshape(shape, bool(node.attributes.get("allowzero", 0))),
                onnx_mapping=OnnxMapping(inputs=(node.input_values[0],), outputs=node.output_values))

        reg[OperationDescription("", "Reshape", v)] = reshape


def _const_input(node, graph, i: int):
    """The constant value of ``node``'s input ``i`` in onnx2torch's ``graph``, None if it has none."""
    from onnx2torch.utils.common import get_const_value

    try:
        return get_const_value(node.input_values[i], graph)
    except (KeyError, IndexError):
        return None


def _register_static_squeeze(reg: dict) -> None:
    """``Squeeze`` (opsets 13, 21) with constant, non-empty axes: a module holding the axes as
    ints (onnx2torch's opset-13 module loops over a tensor); onnx2torch's own converter otherwise."""
    import torch
    from onnx2torch.node_converters.registry import OperationDescription
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    class StaticSqueeze(torch.nn.Module):
        """ONNX Squeeze with constant axes (onnx2torch's opset-13 module loops over a tensor)."""

        def __init__(self, axes: list[int]):
            super().__init__()
            self.axes = [int(a) for a in axes]

        def forward(self, x):
            return torch.squeeze(x, [a if a >= 0 else a + x.dim() for a in self.axes])

    for v in (13, 21):
        original = reg.get(OperationDescription("", "Squeeze", v))
        if original is None:
            continue

        def squeeze(node, graph, _original=original):
            axes = _const_input(node, graph, 1) if len(node.input_values) > 1 else None
            if axes is None or not hasattr(axes, "tolist") or axes.numel() == 0:
                return _original(node, graph)
            return OperationConverterResult(
                torch_module=StaticSqueeze(axes.tolist()),
                onnx_mapping=OnnxMapping(inputs=(node.input_values[0],), outputs=node.output_values))

        reg[OperationDescription("", "Squeeze", v)] = squeeze


def _register_static_gather(reg: dict) -> None:
    """``Gather`` (opsets 1, 11, 13) with a constant scalar index: ``select`` with a Python int;
    onnx2torch's own converter otherwise."""
    import torch
    from onnx2torch.node_converters.registry import OperationDescription
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    class StaticGather(torch.nn.Module):
        """ONNX Gather with a constant scalar index: ``select`` with a Python int (indexing with a
        0-d tensor reads it back to the host)."""

        def __init__(self, axis: int, index: int):
            super().__init__()
            self.axis, self.index = int(axis), int(index)

        def forward(self, x):
            return torch.select(x, self.axis, self.index)

    for v in (1, 11, 13):
        original = reg.get(OperationDescription("", "Gather", v))
        if original is None:
            continue

        def gather(node, graph, _original=original):
            idx = _const_input(node, graph, 1)
            if idx is None or not hasattr(idx, "dim") or idx.dim() != 0:
                return _original(node, graph)
            return OperationConverterResult(
                torch_module=StaticGather(node.attributes.get("axis", 0), int(idx)),
                onnx_mapping=OnnxMapping(inputs=(node.input_values[0],), outputs=node.output_values))

        reg[OperationDescription("", "Gather", v)] = gather


def _register_type_only_versions(reg: dict) -> None:
    """For each version in :data:`TYPE_ONLY_VERSIONS` that onnx2torch lacks, the converter of the
    op's preceding version (ONNX's schema history)."""
    from onnx import defs
    from onnx2torch.node_converters.registry import OperationDescription

    for op, versions in TYPE_ONLY_VERSIONS.items():
        try:
            since = sorted({s.since_version for s in defs.get_all_schemas_with_history()
                            if s.name == op and s.domain == ""})
        except Exception:
            continue
        for v in versions:
            if v not in since or OperationDescription("", op, v) in reg:
                continue
            prev = [s for s in since if s < v]
            if prev and OperationDescription("", op, prev[-1]) in reg:
                reg[OperationDescription("", op, v)] = reg[OperationDescription("", op, prev[-1])]


def _register_gelu(reg: dict) -> None:
    """``Gelu`` (opset 20) as ``torch.nn.GELU`` with its ``approximate`` attribute, unless onnx2torch has one."""
    import torch
    from onnx2torch.node_converters.registry import OperationDescription
    from onnx2torch.utils.common import OperationConverterResult, onnx_mapping_from_node

    if OperationDescription("", "Gelu", 20) in reg:
        return

    def gelu(node, graph):
        approx = node.attributes.get("approximate", "none")
        if isinstance(approx, bytes):
            approx = approx.decode()
        return OperationConverterResult(torch_module=torch.nn.GELU(approximate=str(approx)),
                                        onnx_mapping=onnx_mapping_from_node(node))

    reg[OperationDescription("", "Gelu", 20)] = gelu


_EXTENDED = False


def _import_onnx2torch():
    global _EXTENDED
    try:
        import torchvision  # noqa: F401  (onnx2torch imports it for its NMS/RoiAlign converters)
    except Exception:  # absent, or built for another torch
        import types

        # a stand-in so that onnx2torch imports without torchvision; NMS/RoiAlign then fail when run
        tv = types.ModuleType("torchvision")
        ops = types.ModuleType("torchvision.ops")

        def _missing(*a, **k):
            raise NotImplementedError("torchvision is not installed (needed by NMS/RoiAlign)")

        ops.roi_align = ops.nms = ops.batched_nms = _missing
        tv.ops = ops
        sys.modules.setdefault("torchvision", tv)
        sys.modules.setdefault("torchvision.ops", ops)
    try:
        import onnx2torch
    except ImportError:
        raise UsageError("onnx2torch is not installed: pip install onnx2torch (or \"benanza[profile]\"); "
                         "on a machine without a package index, carry its wheel (pure Python)") from None
    if not _EXTENDED:
        _extend_onnx2torch()
        _EXTENDED = True
    return onnx2torch


def load_torch_model(path: str, batch: int, dims: dict | None = None, batch_dim: int | None = None,
                     seed: int = 0):
    """The ONNX model as a ``torch.nn.Module`` with random weights where the file has none, and
    the shapes and ONNX element types of its data inputs at ``batch``: ``(module, [(name, shape,
    elem_type)])``. Raises :class:`ModelError` naming the op that cannot be converted."""
    from benanza.processing.model import bind_batch, infer_and_fold, load_graph

    model, _ = load_graph(path)
    inline_identity_weights(model)
    random_weights(model, seed)
    weights = {t.name for t in model.graph.initializer}
    bind_batch(model, batch, weights, dims, batch_dim, Path(path).name)
    # shape computations (Shape/Gather/Concat... of constants) folded at this batch: Reshape,
    # Squeeze and Unsqueeze then get constant shapes and axes, as in the framework's own model
    model, _, _ = infer_and_fold(model, weights)
    inputs = []
    for vi in model.graph.input:
        if vi.name in weights:
            continue
        tt = vi.type.tensor_type
        shape = tuple(int(d.dim_value) for d in tt.shape.dim)
        inputs.append((vi.name, shape, int(tt.elem_type)))
    o2t = _import_onnx2torch()
    try:
        module = o2t.convert(model)
    except NotImplementedError as e:
        msg = str(e)
        import re

        m = re.search(r"operation_type='(\w+)', version=(\d+)", msg)
        what = f"no converter for {m.group(1)} (opset {m.group(2)})" if m else msg.splitlines()[0][:200]
        raise ModelError(f"{path}: cannot run the model in PyTorch: onnx2torch: {what}") from None
    except Exception as e:
        raise ModelError(f"{path}: cannot convert the model to PyTorch (onnx2torch): "
                         f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
    return module, inputs


# ------------------------------------------------------------------------------ the child run

def _settings(torch, spec: CaptureSpec, device) -> dict:
    import onnx

    d = {"framework": "pytorch", "framework_version": torch.__version__, "dtype": spec.dtype,
         "device": str(device), "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
         "allow_tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
         "allow_tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
         "cuda_version": torch.version.cuda, "onnx_version": onnx.__version__,
         "memory_format": "channels_last" if spec.channels_last else "contiguous",
         "python": sys.version.split()[0], "mode": "train" if spec.train else "inference"}
    if spec.module is not None:
        d["run"] = "native"
        d["module"] = spec.module.get("spec") or "a module object (benanza.analyze_module)"
        d["compiled"] = spec.compile
    else:
        try:
            d["converter"] = f"onnx2torch {_dist_version('onnx2torch')}"
        except Exception:
            pass
        d["run"] = "onnx2torch"
    try:
        d["cudnn_version"] = torch.backends.cudnn.version()
    except Exception:
        d["cudnn_version"] = None
    if device.type == "cuda":
        d["gpu_name"] = torch.cuda.get_device_name(device)
        cap = torch.cuda.get_device_capability(device)
        d["compute_capability"] = f"{cap[0]}.{cap[1]}"
    return d


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def run_child(spec: CaptureSpec) -> dict:
    """One child run (see the module doc); returns its result document (also written as
    ``OUT/.capture-ROLE.json``)."""
    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch is not installed: pip install torch (benanza profile runs the model in PyTorch)") from None
    device = torch.device(spec.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("no CUDA device: torch.cuda.is_available() is False "
                              "(use --device cpu to profile on the CPU)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"no CUDA device {device.index} ({torch.cuda.device_count()} present)")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = spec.cudnn_benchmark
    tf32 = spec.dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    # the native module runs with PyTorch's defaults: fp32 convolutions in TF32 (torch.backends.cudnn.allow_tf32
    # is True by default), fp32 matmuls in FP32; onnx2torch runs keep benanza's strict fp32
    torch.backends.cudnn.allow_tf32 = tf32 or (spec.module is not None and spec.dtype == "fp32")
    torch.manual_seed(spec.seed)
    cast = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(spec.dtype)
    child = _train_child if spec.train else _profile_child
    gpu = _gpu_turn(torch, device)
    if spec.module is not None:
        t0 = time.perf_counter()
        src = _module_source(spec)
        resolve_s = time.perf_counter() - t0
        with gpu:  # the build on the GPU and every iteration
            t1 = time.perf_counter()
            module, xs, shapes = native_module(torch, spec, device, cast, src)
            result, prof = child(torch, spec, device, module, xs, shapes,
                                 build_s=resolve_s + time.perf_counter() - t1)
    else:
        module, inputs = load_torch_model(spec.model, spec.batch, spec.dims, spec.batch_dim, spec.seed)
        with gpu:
            result, prof = _onnx_module_run(torch, spec, device, cast, child, module, inputs)
    if getattr(gpu, "wait_ms", 0):
        result["gpu_wait_s"] = round(gpu.wait_ms / 1e3, 3)  # waiting for another command's turn on the GPU
    return _write_child(spec, prof, result)


def _gpu_turn(torch, device):
    """The context in which a child puts work on its GPU: the shared GPU lock of
    ``BENANZA_GPU_LOCK_SHARED`` (:data:`benanza.runner.run.SHARED_GPU_LOCK_ENV`) for ``device``, so
    that no other benanza process measures there meanwhile and nothing of theirs runs beside these
    iterations; nothing on the CPU or without that variable. The stream is synchronised before the
    lock is given back. A ``torch.compile`` run compiles inside it (on its first call)."""
    from benanza.runner.run import shared_gpu_turn

    return shared_gpu_turn(device.index if device.type == "cuda" else None, torch.cuda.synchronize)


def _onnx_module_run(torch, spec: CaptureSpec, device, cast, child, module, inputs):
    """The converted ONNX model (``module``, its ``inputs``: (name, shape, element type)) on
    ``device`` in the run's data type and memory format, run by ``child``: (result, profiler)."""
    module = module.eval().to(device)
    if cast is not None:
        module = module.to(cast)
    if spec.channels_last:
        module = module.to(memory_format=torch.channels_last)
    import onnx

    xs = []
    g = torch.Generator(device="cpu").manual_seed(spec.seed)
    for name, shape, et in inputs:
        npdt = onnx.helper.tensor_dtype_to_np_dtype(et)
        if npdt.kind == "f":
            x = torch.randn(*shape, generator=g)
            x = x.to(cast) if cast is not None else x.to(getattr(torch, str(npdt)))
        elif npdt.kind in "iu":
            x = torch.randint(0, 2, shape, generator=g).to(getattr(torch, str(npdt)))
        elif npdt.kind == "b":
            x = torch.ones(*shape, dtype=torch.bool)
        else:
            raise ModelError(f"input {name!r}: element type {npdt} is not supported")
        if spec.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        xs.append(x.to(device))
    return child(torch, spec, device, module, xs, [list(s) for _, s, _ in inputs])


def _module_source(spec: CaptureSpec):
    """The :class:`~benanza.processing.modules.ModuleSource` of ``spec.module`` (CPU work: imports,
    the configuration, a saved module read back)."""
    import torch

    from benanza.processing.modules import from_module, resolve

    m = spec.module
    if m.get("pickle"):
        module = torch.load(m["pickle"], weights_only=False)
        base = torch.load(m["inputs"], weights_only=False)
        return from_module(module, base, tuple(m.get("batch_dims") or ()) or None)
    shape = tuple(m["input_shape"]) if m.get("input_shape") else None
    return resolve(m["spec"], int(m.get("seq") or 128), shape, m.get("phase") or "prefill", m.get("kv_len"),
                   bool(m.get("train")), m.get("mla") or "transformers")


def native_module(torch, spec: CaptureSpec, device, cast, src):
    """The native module of ``spec.module`` (``src``: its source, :func:`_module_source`) on
    ``device`` in the run's data type (``cast``, a torch dtype or None) and memory format (compiled when
    asked), its inputs at ``spec.batch``, and their shapes. ``spec`` needs ``batch``, ``channels_last``
    and ``compile`` only: `benanza torch`'s routing record builds the same module and inputs
    (:func:`benanza.profiles.pytorch.record_routing`)."""
    # built on the device: its parameters are allocated and initialized there (a 1 B-parameter
    # decoder's random initialization on the CPU takes seconds per profiling child), then moved
    # there in case the module created any on the CPU
    with torch.device(device):
        module = src.build()
    module = module.eval().to(device)
    if cast is not None:
        module = module.to(cast)
    if spec.channels_last:
        module = module.to(memory_format=torch.channels_last)
    xs = []
    for x in (src.inputs(spec.batch, device=device) if src.device_inputs else src.inputs(spec.batch)):
        if x.is_floating_point() and cast is not None:
            x = x.to(cast)
        if spec.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        xs.append(x.to(device))
    if spec.compile:
        module = torch.compile(module, mode=None if spec.compile == "default" else spec.compile)
    return module, xs, [list(x.shape) for x in xs]


class _Scopes:
    """``record_function("benanza.module:NAME")`` around every submodule's forward while
    installed (forward pre-hooks open, forward hooks close; the root module is ``""``)."""

    def __init__(self, torch, module):
        self.torch, self.module, self.handles, self.stack = torch, module, [], []

    def __enter__(self):
        from benanza.processing.modules import SCOPE_PREFIX

        rf = self.torch.autograd.profiler.record_function
        for name, sub in self.module.named_modules():
            if not name:
                continue

            def pre(_m, _a, name=name):
                r = rf(SCOPE_PREFIX + name)
                r.__enter__()
                self.stack.append(r)

            def post(_m, _a, _o):
                if self.stack:
                    self.stack.pop().__exit__(None, None, None)

            self.handles.append(sub.register_forward_pre_hook(pre))
            self.handles.append(sub.register_forward_hook(post))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        while self.stack:
            self.stack.pop().__exit__(None, None, None)


def warm_up(run, sync, most: int, fewest: int = MIN_WARMUP, budget_s: float = WARMUP_BUDGET_S,
            clock=time.perf_counter) -> int:
    """Call ``run`` ``most`` times, or fewer once ``fewest`` calls are done and ``budget_s`` seconds
    have passed since the first began (checked after a ``sync``, so the time is the GPU's too);
    returns the calls made. At least one call; ``most`` below ``fewest`` makes ``most``."""
    most = max(most, 1)
    t0, n, fewest = clock(), 0, min(fewest, most)
    while n < most:
        run()
        n += 1
        if n >= fewest and n < most:
            sync()
            if clock() - t0 >= budget_s:
                break
    sync()
    return n


def _latency_or_log_iterations(torch, spec: CaptureSpec, device, run, sync, result: dict,
                               warmup_calls: int | None = None) -> None:
    """After the warm-up, before the profiled iterations: the timed run times ``spec.runs`` calls of
    ``run`` one by one (CUDA events on a GPU, ``perf_counter`` on the CPU; ms), or fewer once
    :data:`MIN_RUNS` are timed and :data:`TIMED_BUDGET_S` has passed, into ``result["latency"]``
    (``warmup``: ``warmup_calls``, the warm-up calls made); the log run calls it ``spec.iterations``
    times, so the libraries log the implementations they settle on."""
    if spec.role != "timed":
        for _ in range(spec.iterations):
            run()
        sync()
        return
    samples = []
    t_end = time.perf_counter() + TIMED_BUDGET_S
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(spec.runs):
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(float(start.elapsed_time(end)))
            if len(samples) >= MIN_RUNS and time.perf_counter() >= t_end:
                break
        method = "cuda_events"
    else:
        for _ in range(spec.runs):
            t0 = time.perf_counter()
            run()
            samples.append((time.perf_counter() - t0) * 1e3)
            if len(samples) >= MIN_RUNS and time.perf_counter() >= t_end:
                break
        method = "perf_counter"
    result["latency"] = {"samples_ms": samples, "method": method,
                         "warmup": spec.warmup if warmup_calls is None else warmup_calls}


def _profile_child(torch, spec: CaptureSpec, device, module, xs, shapes, build_s: float | None = None):
    """Warm up, time (the timed run) and profile ``module`` on inputs ``xs``; return the result
    document (see :func:`run_child`) and the profiler, whose trace :func:`_write_child` writes;
    ``build_s``: seconds the native module took to build, recorded in the document."""
    import contextlib

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def infer():
        return module(*xs)

    what = "the module" if spec.module is not None else "the converted model"
    result = {"role": spec.role, "settings": _settings(torch, spec, device), "inputs": shapes, "build_s": build_s}
    with torch.inference_mode():
        try:
            warmed = warm_up(infer, sync, spec.warmup)
        except Exception as e:
            raise ModelError(f"{spec.model}: {what} fails in PyTorch ({spec.dtype} on {device}): "
                             f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
        _latency_or_log_iterations(torch, spec, device, infer, sync, result, warmed)
        from torch.profiler import ProfilerActivity, profile, record_function

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        timed = spec.role == "timed"
        scopes = _Scopes(torch, module) if spec.scopes and timed and not spec.compile else contextlib.nullcontext()
        with profile(activities=acts, record_shapes=timed) as prof, scopes:
            for _ in range(spec.iterations if timed else 1):
                with record_function("benanza.iteration"):
                    infer()
                sync()
        sync()
    return result, prof


def _write_child(spec: CaptureSpec, prof, result: dict) -> dict:
    """Write the child's trace (the timed run's as ``trace.json.gz``, the log run's as
    ``.trace-logs.json``) and its result document ``.capture-ROLE.json``; return the document."""
    out = Path(spec.out)
    if spec.role == "timed":
        tmp = out / "trace.json"
        prof.export_chrome_trace(str(tmp))
        with open(tmp, "rb") as fi, gzip.open(out / "trace.json.gz", "wb", compresslevel=6) as fo:
            shutil.copyfileobj(fi, fo)
        tmp.unlink()
    else:
        # the kernels of one logged iteration, read back like the timed run's trace
        prof.export_chrome_trace(str(out / ".trace-logs.json"))
    (out / f".capture-{spec.role}.json").write_text(json.dumps(result))
    return result


def _tensors(out) -> list:
    """The tensors of a module's output in order: a tensor, a tuple/list, a dict or a transformers
    ``ModelOutput`` (its values in order), flattened one level deep at a time."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    elif isinstance(out, dict):
        out = list(out.values())
    res = []
    if isinstance(out, (tuple, list)):
        for o in out:
            res.extend(_tensors(o))
    return res


def train_loss(torch, out, targets: dict, seed: int = 0):
    """The loss of a profiled training step and what it is (a string): cross-entropy with class
    indices (``F.cross_entropy``, mean) on the module's first floating-point output of rank 2
    (``(B, classes)``), else of rank 3 with the classes last (``(B, S, V)`` flattened to
    ``(B*S, V)``), as :func:`benanza.processing.training.loss_config` takes the export's logits;
    else ``.float().mean()`` of the first floating-point output (a stand-in the backward starts
    from). Targets: random class indices drawn once per logits shape (a CPU generator seeded with
    ``seed``, kept in ``targets``), so no kernel of the step draws them. Raises ModelError for an
    output without a floating-point tensor."""
    floats = [t for t in _tensors(out) if t.is_floating_point()]
    if not floats:
        raise ModelError("the module's output has no floating-point tensor to take a loss of")
    for rank in (2, 3):
        for t in floats:
            if t.dim() == rank and t.shape[-1] > 1 and t.numel() > 0:
                logits = t.reshape(-1, t.shape[-1])
                key = (tuple(logits.shape), str(t.device))
                if key not in targets:
                    g = torch.Generator(device="cpu").manual_seed(seed)
                    targets[key] = torch.randint(0, t.shape[-1], (logits.shape[0],), generator=g).to(t.device)
                what = f"cross-entropy over {'x'.join(map(str, t.shape))} logits (class indices, mean)"
                return torch.nn.functional.cross_entropy(logits, targets[key]), what
    t = floats[0]
    return t.float().mean(), f"the mean of the {'x'.join(map(str, t.shape))} output (no logits of rank 2 or 3)"


def make_optimizer(torch, name: str, params: list):
    """torch.optim's ``name`` (:data:`benanza.spec.OPTIMIZERS`) over ``params``: SGD(lr=1e-3, momentum=0.9),
    Adam(lr=1e-4), AdamW(lr=1e-4), ``foreach`` at its default (the multi-tensor kernels on CUDA).
    Raises UsageError for another name."""
    if name in SPEC_OPTIMIZERS:
        o = SPEC_OPTIMIZERS[name]
        return getattr(torch.optim, o.torch_class)(params, **dict(o.profiled))
    raise UsageError(f"unknown optimizer {name!r} (choose from {', '.join(SPEC_OPTIMIZERS)})")


def _train_child(torch, spec: CaptureSpec, device, module, xs, shapes, build_s: float | None = None):
    """Warm up, time (the timed run) and profile training iterations of ``module`` on inputs
    ``xs`` (module doc, :data:`benanza.spec.PROFILED_STEP_PHASES`); return the result document and the profiler."""
    import contextlib

    from torch.profiler import ProfilerActivity, profile, record_function

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    module.train()
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ModelError(f"{spec.model}: the module has no parameter that requires a gradient: nothing to train")
    opt = make_optimizer(torch, spec.optimizer, params)
    targets: dict = {}
    about = {}

    def step():
        with record_function("benanza.phase:zero_grad"):
            opt.zero_grad(set_to_none=True)
        with record_function("benanza.phase:forward"):
            out = module(*xs)
        with record_function("benanza.phase:loss"):
            loss, about["loss"] = train_loss(torch, out, targets, spec.seed)
        with record_function("benanza.phase:backward"):
            loss.backward()
        with record_function("benanza.phase:optimizer"):
            opt.step()

    what = "the module" if spec.module is not None else "the converted model"
    result = {"role": spec.role, "settings": _settings(torch, spec, device), "inputs": shapes, "build_s": build_s}
    try:
        warmed = warm_up(step, sync, max(spec.warmup, 2))  # the optimizer creates its state in the first step
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"{spec.model}: a training step of {what} fails in PyTorch ({spec.dtype} on {device}): "
                         f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
    timed = spec.role == "timed"
    _latency_or_log_iterations(torch, spec, device, step, sync, result, warmed)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    scopes = _Scopes(torch, module) if spec.scopes and timed and not spec.compile else contextlib.nullcontext()
    with profile(activities=acts, record_shapes=True) as prof, scopes:
        for _ in range(spec.iterations if timed else 1):
            with record_function("benanza.iteration"):
                step()
            sync()
    sync()
    result["train"] = {"optimizer": spec.optimizer, "foreach": "default", "loss": about.get("loss"),
                       "phases": list(PROFILED_STEP_PHASES), "parameters": sum(p.numel() for p in params),
                       "zero_grad": "set_to_none"}
    if device.type == "cuda":
        result["train"]["max_memory_allocated"] = int(torch.cuda.max_memory_allocated(device))
    return result, prof


def _child_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m benanza.profiles.capture SPEC.json", file=sys.stderr)
        return 2
    try:
        spec = CaptureSpec(**json.loads(Path(argv[0]).read_text()))
        run_child(spec)
        return 0
    except BenanzaError as e:
        print(f"benanza: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line for the parent; BENANZA_DEBUG=1 shows the traceback
        if os.environ.get("BENANZA_DEBUG"):
            raise
        print(f"benanza: internal error in the profiling process: {type(e).__name__}: "
              f"{str(e).splitlines()[0][:300] if str(e) else ''}", file=sys.stderr)
        return 70


# ------------------------------------------------------------------------------------ parent

def log_environment(out: Path, base: dict | None = None) -> dict:
    """The environment of the log run: cuDNN debug logging (level 3) to ``OUT/cudnn.log`` and
    cuBLASLt logging (level 5: API trace, with the matmul trace lines) to ``OUT/cublaslt.log``."""
    env = dict(os.environ if base is None else base)
    env.update({"CUDNN_LOGLEVEL_DBG": "3", "CUDNN_LOGDEST_DBG": str(out / "cudnn.log"),
                "CUBLASLT_LOG_LEVEL": "5", "CUBLASLT_LOG_FILE": str(out / "cublaslt.log")})
    return env


def timed_environment(base: dict | None = None) -> dict:
    """The environment of the timed run: every library logging variable removed."""
    env = dict(os.environ if base is None else base)
    for k in ("CUDNN_LOGLEVEL_DBG", "CUDNN_LOGDEST_DBG", "CUDNN_LOGINFO_DBG", "CUDNN_LOGWARN_DBG",
              "CUDNN_LOGERR_DBG", "CUBLASLT_LOG_LEVEL", "CUBLASLT_LOG_FILE", "CUBLASLT_LOG_MASK",
              "CUBLAS_LOGINFO_DBG", "CUBLAS_LOGDEST_DBG"):
        env.pop(k, None)
    return env


def _run(spec: CaptureSpec, env: dict, timeout: float) -> None:
    out = Path(spec.out)
    sp = out / f".spec-{spec.role}.json"
    sp.write_text(json.dumps(spec.__dict__))
    cmd = [sys.executable, "-m", "benanza.profiles.capture", str(sp)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProfileError(f"the {spec.role} run of {spec.model} did not finish in {timeout:.0f} s") from None
    finally:
        sp.unlink(missing_ok=True)
    if r.returncode != 0:
        lines = [ln for ln in (r.stderr or "").splitlines() if ln.startswith("benanza: ")]
        msg = lines[-1][len("benanza: "):] if lines else \
            f"the {spec.role} run failed (exit {r.returncode}): {(r.stderr or '').strip().splitlines()[-1:] or ''}"
        err = {2: ModelError, 6: DeviceError}.get(r.returncode, ProfileError)
        raise err(msg)


def _kernel_names(trace_path: Path) -> list[str]:
    """The names of the kernels (not memsets or copies) of a trace's first iteration, in order."""
    from benanza.profiles.trace import read_trace

    tr = read_trace(trace_path)
    if not tr.iterations:
        return []
    return [tr.kernels[i].name for i in tr.iterations[0].kernels if tr.kernels[i].kind == "kernel"]


def _gzip(path: Path) -> Path | None:
    if not path.exists():
        return None
    gz = path.with_name(path.name + ".gz")
    with open(path, "rb") as fi, gzip.open(gz, "wb", compresslevel=6) as fo:
        shutil.copyfileobj(fi, fo)
    path.unlink()
    return gz


def capture_profile(model: str | os.PathLike, batch: int, dtype: str, out: str | os.PathLike, device: str = "cuda",
            warmup: int = 20, runs: int = 100, iterations: int = 5, cudnn_benchmark: bool = True,
            logs: bool = True, dims: dict | None = None, batch_dim: int | None = None, force: bool = False,
            timeout: float = 1800.0, say=lambda m: None, channels_last: bool = False,
            module: dict | None = None, compile: str | None = None, train: bool = False,
            optimizer: str = "sgd") -> Path:
    """Profile ``model`` at ``batch`` in ``dtype`` on ``device`` into the folder ``out`` and return
    the path of its ``profile.json`` (format in :mod:`benanza.profiles`).

    With ``module`` (:class:`CaptureSpec`), the native PyTorch module runs instead of the ONNX
    graph (``model`` is then its export, whose hash the profile records), with module scopes in
    the trace; ``compile``: a ``torch.compile`` mode for the native module. With ``train``, both
    runs run training iterations with ``optimizer`` (:data:`benanza.spec.OPTIMIZERS`; module doc) and
    profile.json's ``train`` says how (optimizer, loss, phases, parameter count, peak memory);
    ``latency`` is then the training step's.

    Raises :class:`UsageError` for bad arguments (``dims``: :func:`benanza.processing.model.check_dims`)
    or a folder that already holds a profile (unless ``force``), :class:`ModelError` when the model
    cannot be read, converted or run,
    :class:`DeviceError` without the requested device, :class:`ProfileError` when a run fails.
    """
    from benanza.processing.model import check_dims, load_graph

    dev = _check_capture_arguments(batch, dtype, device, warmup, runs, iterations)
    if train and optimizer not in SPEC_OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} (choose from {', '.join(SPEC_OPTIMIZERS)})")
    mpath = Path(model).resolve()
    graph, digest = load_graph(mpath)  # a bad model fails here, before any child starts
    check_dims(graph, {t.name for t in graph.graph.initializer}, dims, batch, mpath.name)  # and a bad --dim
    del graph
    o = Path(out)
    _prepare_folder(o, force)
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise UsageError("PyTorch is not installed: pip install torch onnx2torch (benanza profile runs the model in PyTorch)")
    common = dict(model=str(mpath), batch=batch, dtype=dtype, device=dev, warmup=warmup, runs=runs,
                  iterations=iterations, cudnn_benchmark=cudnn_benchmark, out=str(o.resolve()),
                  dims=dict(dims or {}), batch_dim=batch_dim, channels_last=channels_last,
                  module=module, compile=compile, scopes=module is not None, train=train, optimizer=optimizer)
    files = {"trace": "trace.json.gz"}
    notices = []
    logged_kernels = None
    seconds = {}
    if logs and dev != "cpu":
        say(f"log run: {mpath.name} batch {batch} {dtype} on {dev} (cuDNN and cuBLASLt logging on)")
        t0 = time.perf_counter()
        logged_kernels = _log_run(CaptureSpec(role="logs", **common), o, timeout, files, notices)
        seconds["log_run"] = time.perf_counter() - t0
    what = "training steps" if train else "iterations"
    say(f"timed run: {warmup} warm-up, {runs} timed, {iterations} profiled {what}")
    t0 = time.perf_counter()
    _run(CaptureSpec(role="timed", **common), timed_environment(), timeout)
    seconds["timed_run"] = time.perf_counter() - t0
    res = json.loads((o / ".capture-timed.json").read_text())
    if res.get("build_s") is not None:
        seconds["timed_run_build"] = res["build_s"]
    if res.get("gpu_wait_s"):
        seconds["timed_run_gpu_wait"] = res["gpu_wait_s"]

    if logged_kernels is not None:
        notice = _kernel_mismatch_notice(logged_kernels, _kernel_names(o / "trace.json.gz"))
        if notice:
            notices.append(notice)
    doc = _profile_doc(mpath, digest, batch, dtype, files, res, warmup, iterations, notices, seconds)
    if train:
        doc["train"] = res.get("train") or {"optimizer": optimizer}
    for n in (".capture-logs.json", ".capture-timed.json", ".trace-logs.json"):
        (o / n).unlink(missing_ok=True)
    pj = o / "profile.json"
    pj.write_text(json.dumps(doc, indent=1))
    return pj


def _profile_doc(mpath: Path, digest: str, batch: int, dtype: str, files: dict, res: dict, warmup: int,
                 iterations: int, notices: list, seconds: dict) -> dict:
    """profile.json's document (format in :mod:`benanza.profiles`) from the timed child's result ``res``."""
    from benanza.profiles.profile import FORMAT, FORMAT_VERSION, Latency

    lat = Latency.from_samples(res["latency"]["samples_ms"], res["latency"]["method"])
    return {
        "format": FORMAT, "version": FORMAT_VERSION,
        "model": mpath.stem, "model_path": str(mpath), "model_sha256": digest,
        "batch": batch, "dtype": dtype, "inputs": res.get("inputs"),
        "files": files,
        "latency": {"samples_ms": lat.samples_ms, "median_ms": lat.median_ms, "q1_ms": lat.q1_ms,
                    "q3_ms": lat.q3_ms, "iqr_ms": lat.iqr_ms, "samples": lat.samples, "method": lat.method,
                    "warmup": res["latency"].get("warmup", warmup)},
        "profiled_iterations": iterations,
        "settings": res["settings"],
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "notices": notices,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
    }


def _check_capture_arguments(batch: int, dtype: str, device: str, warmup: int, runs: int, iterations: int) -> str:
    """The device, lower-cased (``cuda``, ``cuda:N`` or ``cpu``). Raises :class:`UsageError` for an
    unknown data type, a batch or count below 1, another device, or tf32 on the CPU."""
    if dtype not in FRAMEWORK_DTYPES:
        raise UsageError(f"unknown data type {dtype!r} (choose from {', '.join(FRAMEWORK_DTYPES)})")
    if not isinstance(batch, int) or batch <= 0:
        raise UsageError(f"batch size must be positive, got {batch}")
    for name, v, lo in (("--warmup", warmup, 1), ("--runs", runs, 1), ("--iterations", iterations, 1)):
        if v < lo:
            raise UsageError(f"{name} must be at least {lo}, got {v}")
    dev = str(device).lower()
    if not (dev == "cpu" or dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UsageError(f"--device must be cuda, cuda:N or cpu, not {device!r}")
    if dev == "cpu" and dtype == "tf32":
        raise UsageError("tf32 needs a CUDA device")
    return dev


def _prepare_folder(o: Path, force: bool) -> None:
    """Create the profile folder ``o`` and remove a previous profile's files from it. Raises
    :class:`UsageError` when ``o`` is not a folder, or holds a profile and ``force`` is off."""
    if o.exists() and not o.is_dir():
        raise UsageError(f"{o}: exists and is not a folder")
    if (o / "profile.json").exists() and not force:
        raise UsageError(f"{o}: already holds a profile (profile.json); use --force to replace it")
    o.mkdir(parents=True, exist_ok=True)
    for n in ("profile.json", "trace.json.gz", "cudnn.log", "cudnn.log.gz", "cublaslt.log", "cublaslt.log.gz"):
        (o / n).unlink(missing_ok=True)


def _log_run(spec: CaptureSpec, o: Path, timeout: float, files: dict, notices: list) -> list[str]:
    """Run the log child (``spec``) into the folder ``o``: its cuDNN and cuBLASLt logs are gzipped
    and named in ``files`` (a notice in ``notices`` for a log not written). Returns the kernel
    names of its traced iteration, to compare with the timed run's."""
    _run(spec, log_environment(o.resolve()), timeout)
    for key, name in (("cudnn_log", "cudnn.log"), ("cublaslt_log", "cublaslt.log")):
        gz = _gzip(o / name)
        if gz is not None:
            files[key] = gz.name
        else:
            notices.append(f"{name} was not written (the library did not log: is it loaded?)")
    logged_kernels = _kernel_names(o / ".trace-logs.json")
    (o / ".trace-logs.json").unlink(missing_ok=True)
    return logged_kernels


def _kernel_mismatch_notice(logged: list[str], timed_names: list[str]) -> str | None:
    """The notice when the log run and the timed run launched different kernels (the engines
    from the logs may then not be those of the trace); None when they launched the same."""
    if logged == timed_names:
        return None
    import difflib

    # kernels of the timed run without a counterpart in the log run (an extra or missing
    # kernel shifts the rest, so align the two sequences first)
    same = sum(b.size for b in difflib.SequenceMatcher(None, logged, timed_names, autojunk=False)
               .get_matching_blocks())
    diff = len(timed_names) - same
    return (f"the log run and the timed run launched different kernels ({diff} of the timed run's "
            f"{len(timed_names)} have no counterpart, the log run launched {len(logged)}; autotuning "
            f"chose differently?): engines from the logs may not be those of the trace")


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
