"""Resize backward layers: the data gradient of a :class:`~benanza.kinds.resize.ResizeConfig` in a training
step (docs/training.md). Resize is linear in x, y = R x with R the taps of :func:`~benanza.kinds.resize.resize_taps`,
so dx = R^T dy: every element of dy adds its tap weight times itself into each of its taps of dx
(PyTorch's ``upsample_nearest{1,2,3}d_backward``, ``_upsample_nearest_exact*d_backward``,
``upsample_linear1d_backward``, ``upsample_bilinear2d_backward``, ``upsample_trilinear3d_backward``,
``upsample_bicubic2d_backward``; tools/autograd/derivatives.yaml). The ONNX ``scales`` / ``sizes``
(and ``roi``) inputs are constants: they get no gradient.

cuDNN and cuBLAS have no resize call (:mod:`benanza.kinds.resize`), so the library side is benanza's own
kernel ``benanza::resize_backward_kernel`` (``cpp/src/resize_kernels.cu``: cudaMemsetAsync of dx, then
one thread per element of dy, atomicAdd of w * dy into each tap) and the framework side PyTorch's
``upsample_*_backward`` op of the same output size, scales and align_corners as the forward candidate.

The whole slice of the kind: its config, the case its template renders (the forward's
:class:`~benanza.kinds.resize.ResizeCase`), its minimum bytes, its PyTorch candidate, the ATen ops of
the profile join and its place as the Resize kind's backward call (:class:`benanza.kinds.base.Kind`).
It maps no ONNX op: processing makes its configs from the forward layers (``Kind.backward`` of Resize).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.framework import Candidate, Ctx, algo_label
from benanza.kinds.resize import TAPS, ResizeCase, ResizeConfig, interpolate_args, resize_case, resize_taps


@dataclass(frozen=True)
class ResizeBwdConfig(LayerConfig):
    """The data gradient of a Resize / Upsample: dx (shape ``x``, N, C, 1 to 3 spatial dims) from dy
    (shape ``y``, the forward's output), dx = R^T dy for the forward's linear map R: dx starts at zero
    and each element of dy adds ``w * dy`` into each of its taps (:func:`~benanza.kinds.resize.resize_taps`,
    the product over spatial dims). Fields, their meaning and their checks (ValueError) as
    :class:`~benanza.kinds.resize.ResizeConfig`'s: the same kernel parameters.

    Timed: ``benanza::resize_backward_kernel`` (cudaMemsetAsync of dx, then atomicAdd of each tap's
    share; the order of the additions into one element of dx, and so its rounding, is not
    deterministic, as PyTorch's CUDA ``upsample_bilinear2d_backward``'s atomicAdd) and PyTorch's
    ``upsample_*_backward``. FLOPs: a multiply and an add per tap of each element of dy,
    ``2 * numel(y) * taps ** nsp``; for nearest one addition per element of dy, ``numel(y)``.
    """

    kind: ClassVar[str] = "ResizeBwd"
    x: Shape
    y: Shape
    mode: str
    coord: str
    nearest_mode: str = ""
    cubic_coeff_a: float = -0.75
    scales: tuple[float, ...] = ()

    def __post_init__(self):
        fwd = self.forward  # the forward's checks (ValueError) and float normalisation
        object.__setattr__(self, "scales", fwd.scales)
        object.__setattr__(self, "cubic_coeff_a", fwd.cubic_coeff_a)

    @classmethod
    def of(cls, fwd: ResizeConfig) -> "ResizeBwdConfig":
        """The data gradient of the forward Resize ``fwd``."""
        return cls(**{f.name: getattr(fwd, f.name) for f in fields(ResizeConfig)})

    @property
    def forward(self) -> ResizeConfig:
        """The forward Resize this is the gradient of."""
        return ResizeConfig(**{f.name: getattr(self, f.name) for f in fields(ResizeConfig)})

    @property
    def nsp(self) -> int:
        return len(self.x) - 2

    def input_shapes(self):
        return [self.y]  # dy

    def output_shape(self):
        return self.x

    def flops(self):
        taps = 1 if self.mode == "nearest" else 2 * TAPS[self.mode] ** self.nsp
        return numel(self.y) * taps

    def describe(self):
        m = self.nearest_mode if self.mode == "nearest" else self.mode
        return f"ResizeBwd({m} {self.coord} {'x'.join(map(str, self.y))} -> {'x'.join(map(str, self.x))})"


def resize_backward_reference(cfg: ResizeBwdConfig, dy: np.ndarray) -> np.ndarray:
    """dx = R^T dy in numpy from :func:`~benanza.kinds.resize.resize_taps`, what the kernel computes:
    one spatial dim after another (R is a product of one matrix per dim), each element of dy added
    with its tap's weight into its tap's index (``np.add.at``: repeated indices accumulate), in
    float64. dy: an array of shape ``cfg.y`` (NCHW order); returns shape ``cfg.x``."""
    g = np.asarray(dy, np.float64)
    for d in range(cfg.nsp):
        idx, w = resize_taps(cfg.forward, d)  # (out, T)
        ax = 2 + d
        g = np.moveaxis(g, ax, -1)  # (..., out)
        acc = np.zeros(g.shape[:-1] + (cfg.x[ax],))
        for t in range(idx.shape[1]):
            np.add.at(acc, (..., idx[:, t]), g * w[:, t].astype(np.float64))
        g = np.moveaxis(acc, -1, ax)
    return g


def resize_backward(cfg: ResizeConfig) -> tuple:
    """``Kind.backward`` of the Resize kind: one data-gradient call (Resize has no weights; its scales,
    sizes and roi inputs are constants with no gradient)."""
    return (("backward_data", ResizeBwdConfig.of(cfg)),)


def _case(cfg: ResizeBwdConfig, job: Job) -> ResizeCase:
    """The forward's case (``templates/resize_backward.cpp.j2`` has the forward's ``ResizeCase`` fields)."""
    return resize_case(cfg.forward, job)


def _min_bytes(cfg: ResizeBwdConfig, ib: int, ob: int) -> int:
    """dy read once (``ib`` bytes an element), dx written once (``ob``). Bytes; Williams et al.,
    "Roofline", CACM 2009: compulsory traffic. The zero fill of dx that a scatter-add needs first
    (this kernel's cudaMemsetAsync, PyTorch's CUDA ``upsample_bilinear2d_backward``) is not
    compulsory: a gather over each dx element's taps (PyTorch's nearest backward) writes dx once,
    so a minimum that counted it would not be a lower bound (as GatherBwd does not count its fill)."""
    return ib * numel(cfg.y) + ob * numel(cfg.x)


def backward_args(cfg: ResizeBwdConfig) -> tuple[str, tuple]:
    """PyTorch's backward op of the forward candidate's ``F.interpolate`` (:func:`~benanza.kinds.resize.interpolate_args`)
    and its arguments after grad_output, as aten/src/ATen/native/native_functions.yaml declares them:
    ``upsample_nearest*d_backward`` / ``_upsample_nearest_exact*d_backward(grad_output, output_size,
    input_size, scales...)``, the linear and cubic ones ``(grad_output, output_size, input_size,
    align_corners, scales...)``; one scale per spatial dim, the forward's when F.interpolate passed
    its scale_factor, else None. Raises NotSupported where the forward has no exact PyTorch call."""
    op, kw = interpolate_args(cfg.forward)
    scales = tuple(kw["scale_factor"]) if "scale_factor" in kw else (None,) * cfg.nsp
    args = (list(cfg.y[2:]), list(cfg.x))
    if "align_corners" in kw:
        args += (kw["align_corners"],)
    return f"{op}_backward", args + scales


def _torch(c: Ctx) -> Candidate:
    """``torch.ops.aten.<op>_backward`` of :func:`backward_args` on a random dy (channels-last for an
    NHWC job)."""
    cfg = c.cfg
    op, args = backward_args(cfg)
    fn = getattr(c.torch.ops.aten, op)
    dy = c.fmt(c.randn(cfg.y))
    return Candidate(f"torch:aten::{op}", algo_label(c), lambda: fn(dy, *args), numel(cfg.x))


def _nhwc_job(cfg: ResizeBwdConfig, neighbour: bool) -> bool:
    """Every config: an image with channels, as the forward's."""
    return True


#: the ATen backward ops of the forward ops PyTorch's F.interpolate runs (:mod:`benanza.kinds.resize`)
ATEN = ("aten::upsample_nearest1d_backward", "aten::upsample_nearest2d_backward", "aten::upsample_nearest3d_backward",
        "aten::_upsample_nearest_exact1d_backward", "aten::_upsample_nearest_exact2d_backward",
        "aten::_upsample_nearest_exact3d_backward", "aten::upsample_linear1d_backward",
        "aten::upsample_bilinear2d_backward", "aten::upsample_trilinear3d_backward",
        "aten::upsample_bicubic2d_backward")

#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ResizeBwdConfig(x=(1, 256, 32, 32), y=(1, 256, 64, 64), mode="nearest", coord="asymmetric",
                            nearest_mode="floor", scales=(2.0, 2.0)),
    name="ResizeBwd", config=ResizeBwdConfig, template="resize_backward.cpp.j2", case=_case, min_bytes=_min_bytes,
    torch=_torch, aten={op: ATEN for op in ("Resize", "Upsample")}, nhwc=True, image=True, nhwc_job=_nhwc_job,
    backward_of={"Resize": resize_backward})
