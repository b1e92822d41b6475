"""Pooling backward layers: the data gradient of a :class:`~benanza.kinds.pooling.PoolingConfig` in a
training step (docs/training.md), cudnnPoolingBackward (max, average with or without the padding counted,
global average), on NCHW and channels-last tensors as the forward kind.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate (the ATen backward op autograd runs) and its place as the forward kind's backward call
(:class:`benanza.kinds.base.Kind`). It maps no ONNX op: processing makes its configs from the forward
layers (``Kind.backward`` of the Pooling kind).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.pooling import PoolingCase, PoolingConfig, pooling_case


@dataclass(frozen=True)
class PoolingBwdConfig(LayerConfig):
    """The data gradient of a pooling layer: dx (shape ``x``) from dy (shape ``y``).

    Fields as :class:`~benanza.kinds.pooling.PoolingConfig`: x: (N, C, *spatial) the forward's input;
    y: its output; mode "max", "avg_include_pad" or "avg_exclude_pad"; kernel, pads (begin..., end...),
    strides. A global average pool is a window of the whole spatial extent. Inputs: dy, and x (a max
    pool's backward finds each window's maximum again, or reads indices saved by the forward); output:
    dx. cudnnPoolingBackward reads y, dy and x and writes dx; PyTorch's max_pool*_with_indices_backward
    reads dy and the int64 indices of the forward, avg_pool*_backward and
    _adaptive_avg_pool*_backward dy only.

    FLOPs: an average pool's backward adds each dy / count into every element of its window
    (numel(y) * numel(kernel)); a max pool's adds each dy into the one element that was the maximum
    (numel(y)).
    """

    kind: ClassVar[str] = "PoolingBwd"
    x: Shape
    y: Shape
    mode: str
    kernel: tuple[int, ...]
    pads: tuple[int, ...]
    strides: tuple[int, ...]

    @classmethod
    def of(cls, fwd: PoolingConfig) -> "PoolingBwdConfig":
        """The backward call of the forward pooling ``fwd``."""
        return cls(x=tuple(fwd.x), y=tuple(fwd.y), mode=fwd.mode, kernel=tuple(fwd.kernel), pads=tuple(fwd.pads),
                   strides=tuple(fwd.strides))

    @property
    def forward(self) -> PoolingConfig:
        """The forward pooling this is the gradient of."""
        return PoolingConfig(x=self.x, y=self.y, mode=self.mode, kernel=self.kernel, pads=self.pads,
                             strides=self.strides)

    @property
    def is_global(self) -> bool:
        """A window of the whole spatial extent, no pads, one output element per channel."""
        return (tuple(self.kernel) == tuple(self.x[2:]) and all(d == 1 for d in self.y[2:])
                and not any(self.pads))

    def input_shapes(self):
        return [self.y, self.x]  # dy, x

    def output_shape(self):
        return self.x

    def flops(self):
        return numel(self.y) * (1 if self.mode == "max" else numel(self.kernel))

    def describe(self):
        return (f"PoolingBwd({self.mode} {'x'.join(map(str, self.x))} k{'x'.join(map(str, self.kernel))} "
                f"s{','.join(map(str, self.strides))} <- {'x'.join(map(str, self.y))})")


def pooling_backward(cfg: PoolingConfig) -> tuple:
    """``Kind.backward`` of the Pooling kind: one data-gradient call (pooling has no weights)."""
    return (("backward_data", PoolingBwdConfig.of(cfg)),)


def argmax_bytes(cfg: PoolingBwdConfig) -> int:
    """Bytes per dy element that say where a max pool's window had its maximum: the smallest integer
    type that holds an offset within the window (1 byte up to 256 elements); 0 for average pooling."""
    if cfg.mode != "max":
        return 0
    w = numel(cfg.kernel)
    return 1 if w <= 1 << 8 else 2 if w <= 1 << 16 else 4


def _min_bytes(cfg: PoolingBwdConfig, ib: int, ob: int) -> int:
    """dy read once and dx written once (bytes), and for a max pool the position of each window's
    maximum at :func:`argmax_bytes` per dy element: the least any implementation moves (cuDNN reads x
    and y to find it again, PyTorch reads int64 indices; an average pool's backward needs dy alone)."""
    return (ib + argmax_bytes(cfg)) * numel(cfg.y) + ob * numel(cfg.x)


@dataclass(frozen=True)
class PoolingBwdCase(PoolingCase):
    """One row of ``templates/pooling_backward.cpp.j2``'s case table: the fields of its C++
    ``PoolingBwdCase`` in order (those of the forward's ``PoolingCase``: the same descriptors), as C++
    literals (``tests/test_kinds_registry.py`` checks the order against the template)."""


def _case(cfg: PoolingBwdConfig, job: Job) -> PoolingBwdCase:
    fwd = pooling_case(cfg.forward, job)
    return PoolingBwdCase(**{f.name: getattr(fwd, f.name) for f in dataclasses.fields(fwd)})


def _torch(c: Ctx) -> Candidate:
    """The ATen backward op autograd runs for the forward candidate of
    :func:`benanza.kinds.pooling._pooling`: ``_adaptive_avg_pool{2,3}d_backward`` for a global average
    pool, ``max_pool{2,3}d_with_indices_backward`` (indices from a forward call in the set-up) and
    ``avg_pool{2,3}d_backward``; a 1-D pool is PyTorch's 2-D pool of the tensor unsqueezed at dim -2
    (aten/src/ATen/native/Pooling.cpp), and so is its backward. NotSupported: GlobalMaxPool (autograd
    of amax is several kernels) and asymmetric pads (the forward pads first)."""
    cfg, F, torch = c.cfg, functional(c), c.torch
    aten = torch.ops.aten
    nsp = len(cfg.kernel)
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D pooling")
    xs, ys, kernel, strides = list(cfg.x), list(cfg.y), list(cfg.kernel), list(cfg.strides)
    begin, end = list(cfg.pads[:nsp]), list(cfg.pads[nsp:])
    if nsp == 1:  # PyTorch's 1-D pools are its 2-D pools of (N, C, 1, L)
        xs, ys = xs[:2] + [1] + xs[2:], ys[:2] + [1] + ys[2:]
        kernel, strides, begin, end = [1] + kernel, [1] + strides, [0] + begin, [0] + end
    d = len(kernel)
    x, dy = c.fmt(c.randn(xs)), c.fmt(c.randn(ys))
    out = numel(cfg.x)
    if cfg.is_global:
        if cfg.mode == "max":
            raise NotSupported("GlobalMaxPool backward: autograd of amax is an eq, a sum, a div and a mul")
        op = aten._adaptive_avg_pool2d_backward if d == 2 else aten._adaptive_avg_pool3d_backward
        return Candidate(f"torch:aten::_adaptive_avg_pool{d}d_backward", algo_label(c), lambda: op(dy, x), out)
    if begin != end or any(2 * p > k for p, k in zip(begin, kernel)):
        raise NotSupported("pooling backward with asymmetric pads (the forward pads first; the pad's "
                           "backward is another kernel)")
    padded = [xs[2 + i] + 2 * begin[i] for i in range(d)]
    ceil = any((n - k) // st + 1 != o for n, k, st, o in zip(padded, kernel, strides, ys[2:]))
    if cfg.mode == "max":
        fwd = F.max_pool2d if d == 2 else F.max_pool3d
        idx = fwd(x, kernel, strides, begin, ceil_mode=ceil, return_indices=True)[1]
        op = aten.max_pool2d_with_indices_backward if d == 2 else aten.max_pool3d_with_indices_backward
        return Candidate(f"torch:aten::max_pool{d}d_with_indices_backward", algo_label(c),
                         lambda: op(dy, x, kernel, strides, begin, [1] * d, ceil, idx), out)
    inc = cfg.mode == "avg_include_pad"
    op = aten.avg_pool2d_backward if d == 2 else aten.avg_pool3d_backward
    return Candidate(f"torch:aten::avg_pool{d}d_backward", algo_label(c),
                     lambda: op(dy, x, kernel, strides, begin, ceil, inc, None), out)


def _nhwc_job(cfg: PoolingBwdConfig, neighbour: bool) -> bool:
    """Rank 3 and above (an image with channels), as the forward kind."""
    return len(cfg.x) >= 3


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=PoolingBwdConfig(x=(1, 64, 112, 112), y=(1, 64, 56, 56), mode="max", kernel=(3, 3), pads=(1, 1, 1, 1),
                             strides=(2, 2)),
    name="PoolingBwd", config=PoolingBwdConfig, template="pooling_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"Pooling": pooling_backward},
    nhwc=True, image=True, nhwc_job=_nhwc_job)
