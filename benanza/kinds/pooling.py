"""Pooling layers. MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool: cudnnPoolingForward.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need, spatial_pads


@dataclass(frozen=True)
class PoolingConfig(LayerConfig):
    """MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool: cudnnPoolingForward.

    x: (N, C, *spatial); y: given (it carries ceil_mode). pads: (begin..., end...).
    mode: "max", "avg_include_pad" or "avg_exclude_pad".
    """

    kind: ClassVar[str] = "Pooling"
    x: Shape
    y: Shape
    mode: str
    kernel: tuple[int, ...]
    pads: tuple[int, ...]
    strides: tuple[int, ...]

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.y) * numel(self.kernel)

    def describe(self):
        return (f"Pooling({self.mode} {'x'.join(map(str, self.x))} k{'x'.join(map(str, self.kernel))} "
                f"s{','.join(map(str, self.strides))} -> {'x'.join(map(str, self.y))})")


def _map_pool(node, ctx, attrs):
    x = need(ctx.shape(node.input[0]), "input")
    y = need(ctx.shape(node.output[0]), "output")
    if len(x) < 3 or len(x) > 5:
        raise Unsupported(f"pooling on a rank-{len(x)} tensor")
    nsp = len(x) - 2
    op = node.op_type
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        mode = "max" if op == "GlobalMaxPool" else "avg_include_pad"
        return PoolingConfig(x=tuple(x), y=tuple(y), mode=mode, kernel=tuple(x[2:]),
                               pads=(0,) * (2 * nsp), strides=(1,) * nsp)
    if len(node.output) > 1 and any(node.output[1:]):
        raise Unsupported("MaxPool with an Indices output")
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", [1] * nsp))
    dil = tuple(attrs.get("dilations", [1] * nsp))
    if any(d != 1 for d in dil):
        raise Unsupported("dilated pooling (cuDNN pooling has no dilation)")
    if int(attrs.get("storage_order", 0)):
        raise Unsupported("MaxPool with column-major storage_order")
    pads = spatial_pads(attrs, x, kernel, strides, dil)
    if op == "MaxPool":
        mode = "max"
    else:
        mode = "avg_include_pad" if int(attrs.get("count_include_pad", 0)) else "avg_exclude_pad"
    return PoolingConfig(x=tuple(x), y=tuple(y), mode=mode, kernel=kernel, pads=pads, strides=strides)


_POOL = {"max": "CUDNN_POOLING_MAX", "avg_include_pad": "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING",
         "avg_exclude_pad": "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING"}


def pooling_cudnn_pads(cfg: PoolingConfig) -> tuple[list[int], str]:
    """Symmetric cuDNN pads that give ``cfg.y`` (cuDNN pools with equal pads and floor rounding).

    Asymmetric pads and ceil_mode are expressed as the smallest symmetric pad (< window) whose
    floor-rounded output has the ONNX output size: the same output shape and work. Raises
    ValueError when no such pad exists.
    """
    nsp = len(cfg.kernel)
    pads, notes = [], []
    for i in range(nsp):
        n, k, s = cfg.x[2 + i], cfg.kernel[i], cfg.strides[i]
        want = cfg.y[2 + i]
        b, e = cfg.pads[i], cfg.pads[nsp + i]
        for p in range(max(b, e) if b != e else b, k):
            if (n + 2 * p - k) // s + 1 == want:
                break
        else:
            p = min(b, e)
            if (n + 2 * p - k) // s + 1 != want:
                raise ValueError(f"no symmetric pad gives output {want} for size {n}, window {k}, stride {s}")
        if (p, p) != (b, e):
            notes.append(f"dim {i}: pads ({b},{e}) timed as symmetric pad {p} (same output size)")
        pads.append(p)
    return pads, "; ".join(notes)


@dataclass(frozen=True)
class PoolingCase(Case):
    """One row of ``templates/pooling.cpp.j2``'s case table: the fields of its C++ ``PoolingCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nsp: CppValue
    x: CppValue
    y: CppValue
    mode: CppValue
    window: CppValue
    pad: CppValue
    stride: CppValue
    note: CppValue


def pooling_case(cfg: PoolingConfig, job: Job) -> PoolingCase:
    """The case of ``cfg`` (the backward kind's too: cudnnPoolingBackward takes the same descriptors)."""
    nsp = len(cfg.kernel)
    x, y = list(cfg.x), list(cfg.y)
    pads, note = pooling_cudnn_pads(cfg)
    kernel, strides = list(cfg.kernel), list(cfg.strides)
    if nsp == 1:
        x, y = x[:2] + [1] + x[2:], y[:2] + [1] + y[2:]
        kernel, strides, pads = [1] + kernel, [1] + strides, [0] + pads
        nsp = 2
    return PoolingCase(job=job_init(job), nsp=nsp, x=c_array(x, 5), y=c_array(y, 5), mode=_POOL[cfg.mode], window=c_array(kernel, 3, 1), pad=c_array(pads, 3), stride=c_array(strides, 3, 1), note=cpp_string(note))


def _pooling(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, functional(c), c.torch
    nsp = len(cfg.kernel)
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D pooling")
    x = c.fmt(c.randn(cfg.x))
    out_sp = tuple(cfg.y[2:])
    if tuple(cfg.kernel) == tuple(cfg.x[2:]) and all(d == 1 for d in out_sp) and not any(cfg.pads):
        if cfg.mode == "max":  # GlobalMaxPool
            dims = tuple(range(2, 2 + nsp))
            return Candidate("torch:aten::amax", algo_label(c), lambda: torch.amax(x, dims, keepdim=True), numel(cfg.y))
        ad = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[nsp]
        return Candidate(f"torch:aten::adaptive_avg_pool{nsp}d", algo_label(c), lambda: ad(x, 1), numel(cfg.y))
    begin, end = list(cfg.pads[:nsp]), list(cfg.pads[nsp:])
    pad_first, note = None, ""
    if begin != end or any(2 * p > k for p, k in zip(begin, cfg.kernel)):
        pad_first = []
        for i in reversed(range(nsp)):
            pad_first += [begin[i], end[i]]
        begin = [0] * nsp
        note = "asymmetric pads: F.pad first"
    # the padded size the pooling sees (pads given to it, or applied by F.pad first); ceil mode where
    # floor rounding would not give the ONNX output size
    padded = [cfg.x[2 + i] + cfg.pads[i] + cfg.pads[nsp + i] for i in range(nsp)]
    ceil = any((n - k) // st + 1 != o for n, k, st, o in zip(padded, cfg.kernel, cfg.strides, out_sp))
    if cfg.mode == "max":
        op = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
        fill = float("-inf")
        run = (lambda t: op(t, cfg.kernel, cfg.strides, begin, ceil_mode=ceil))
        name = f"max_pool{nsp}d"
    else:
        op = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
        fill = 0.0
        inc = cfg.mode == "avg_include_pad"
        run = (lambda t: op(t, cfg.kernel, cfg.strides, begin, ceil_mode=ceil, count_include_pad=inc))
        name = f"avg_pool{nsp}d"
    if pad_first is not None:
        return Candidate(f"torch:aten::constant_pad_nd+{name}", algo_label(c),
                         lambda: run(F.pad(x, pad_first, value=fill)), numel(cfg.y), note)
    return Candidate(f"torch:aten::{name}", algo_label(c), lambda: run(x), numel(cfg.y))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
def _nhwc_job(cfg: PoolingConfig, neighbour: bool) -> bool:
    """Rank 3 and above (an image with channels)."""
    return len(cfg.x) >= 3


KIND = Kind(
    example=PoolingConfig(x=(1, 256, 6, 6), y=(1, 256, 6, 6), mode='avg_exclude_pad', kernel=(1, 1), pads=(0, 0, 0,
        0), strides=(1, 1)),
    name="Pooling", config=PoolingConfig, template="pooling.cpp.j2", case=pooling_case, min_bytes=io_bytes,
    torch=_pooling, onnx={"AveragePool": _map_pool, "GlobalAveragePool": _map_pool, "GlobalMaxPool": _map_pool, "MaxPool": _map_pool},
    typed_ops=(), fused_from=(),
    aten={"AveragePool": ('aten::avg_pool1d', 'aten::avg_pool2d', 'aten::avg_pool3d'), "GlobalAveragePool": ('aten::_adaptive_avg_pool2d', 'aten::adaptive_avg_pool1d', 'aten::adaptive_avg_pool2d', 'aten::adaptive_avg_pool3d', 'aten::mean'), "GlobalMaxPool": ('aten::adaptive_max_pool2d', 'aten::amax', 'aten::max'), "MaxPool": ('aten::max_pool1d', 'aten::max_pool2d', 'aten::max_pool2d_with_indices', 'aten::max_pool3d', 'aten::max_pool3d_with_indices')},
    nhwc=True, image=True, nhwc_job=_nhwc_job)
