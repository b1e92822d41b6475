"""Resize layers. ONNX Resize (opset 10-19) and Upsample (opset 7-9) on (N, C, *spatial) tensors with 1
to 3 spatial dims: modes nearest (each ``nearest_mode``), linear (linear, bilinear, trilinear) and
cubic (``cubic_coeff_a``), coordinate_transformation_mode half_pixel, pytorch_half_pixel,
align_corners and asymmetric, from constant scales or sizes.

cuDNN has no resize or upsampling call (its one spatial resampler, cudnnSpatialTfSamplerForward, reads a
sampling grid from memory) and cuBLAS none either, so the library side is benanza's own kernel
(``benanza::resize_kernel``, ``cpp/src/resize_kernels.cu``; its index and weight arithmetic,
``resize_taps`` of ``cpp/include/benanza/resize.hpp``, is :func:`resize_taps` here) and the framework
side PyTorch's ``F.interpolate`` (``aten::upsample_nearest{1,2,3}d``, ``_upsample_nearest_exact*d``,
``upsample_linear1d``, ``upsample_bilinear2d``, ``upsample_trilinear3d``, ``upsample_bicubic2d``).
Tensors carry a neighbouring convolution's layout: the kind is also timed channels-last (NHWC / NDHWC).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need

#: the modes, coordinate transformations and nearest roundings benanza times, by their ONNX names, in
#: the order of the enums of cpp/include/benanza/resize.hpp
MODES = ("nearest", "linear", "cubic")
COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: taps per spatial dim of each mode
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


@dataclass(frozen=True)
class ResizeConfig(LayerConfig):
    """ONNX Resize / Upsample of x (N, C, *spatial; 1 to 3 spatial dims) to y (N, C, *spatial'): each
    output element the weighted sum of its taps, the product over spatial dims of
    :func:`resize_taps` (1 tap per dim for nearest, 2 linear, 4 cubic).

    mode: ``nearest``, ``linear`` or ``cubic``; coord: the coordinate_transformation_mode (one of
    :data:`COORDS`); nearest_mode: one of :data:`NEAREST_MODES` for nearest ("" otherwise);
    cubic_coeff_a: A of the cubic kernel (-0.75, ONNX's and PyTorch's default, unless cubic);
    scales: ONNX's scale of each spatial dim (given, or out / in when sizes are given; a float32
    value, as the model's scales tensor and the kernel hold it), which the coordinate
    transformations divide by. FLOPs: a multiply and an add per tap of each output
    element, ``2 * numel(y) * taps ** nsp`` (0 for nearest, a copy).
    Raises ValueError for a rank outside 3-5 or a name outside the lists above.
    """

    kind: ClassVar[str] = "Resize"
    x: Shape
    y: Shape
    mode: str
    coord: str
    nearest_mode: str = ""
    cubic_coeff_a: float = -0.75
    scales: tuple[float, ...] = ()

    def __post_init__(self):
        # floats as numbers (the database stores their repr: config_from_params gives strings back)
        object.__setattr__(self, "scales", tuple(float(s) for s in self.scales))
        object.__setattr__(self, "cubic_coeff_a", float(self.cubic_coeff_a))
        if not 3 <= len(self.x) <= 5 or len(self.y) != len(self.x) or tuple(self.x[:2]) != tuple(self.y[:2]):
            raise ValueError(f"ResizeConfig: x {self.x} -> y {self.y} is not (N, C, 1 to 3 spatial dims) with N, C kept")
        if self.mode not in MODES or self.coord not in COORDS:
            raise ValueError(f"ResizeConfig: mode {self.mode!r} / coordinate mode {self.coord!r} not supported")
        if (self.mode == "nearest") != (self.nearest_mode in NEAREST_MODES):
            raise ValueError(f"ResizeConfig: nearest_mode {self.nearest_mode!r} with mode {self.mode!r}")
        if len(self.scales) != len(self.x) - 2 or any(not s > 0 for s in self.scales):
            raise ValueError(f"ResizeConfig: scales {self.scales} for {len(self.x) - 2} spatial dims")

    @property
    def nsp(self) -> int:
        return len(self.x) - 2

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return 0 if self.mode == "nearest" else 2 * numel(self.y) * TAPS[self.mode] ** self.nsp

    def describe(self):
        m = self.nearest_mode if self.mode == "nearest" else self.mode
        return f"Resize({m} {self.coord} {'x'.join(map(str, self.x))} -> {'x'.join(map(str, self.y))})"


def resize_taps(cfg: ResizeConfig, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The taps of every output index along spatial dim ``d``: (indices (out, T) int64 in [0, in),
    weights (out, T) float32), T = :data:`TAPS` of the mode. float32 arithmetic, the same steps as
    ``resize_taps`` of cpp/include/benanza/resize.hpp (tests/test_resize.py checks the two against each
    other and against onnx's reference Resize). Source coordinate x of output o (ONNX Resize spec):
    half_pixel (o + 0.5) / s - 0.5; pytorch_half_pixel the same, 0 for an output of length 1;
    align_corners o * (in - 1) / (s * in - 1) (0 where s * in = 1; onnx's reference divides by the
    real resized length); asymmetric o / s. nearest rounds x by nearest_mode (an integer x is itself);
    linear takes floor(x), floor(x) + 1 with 1 - r, r (r = x - floor(x)); cubic floor(x) - 1 ..
    floor(x) + 2 with Keys' coefficients of A = cubic_coeff_a (onnx's ``_cubic_coeffs``); indices
    clamped to [0, in) (the reference's edge padding)."""
    f = np.float32
    n_in, n_out, s = cfg.x[2 + d], cfg.y[2 + d], f(cfg.scales[d])
    o = np.arange(n_out, dtype=f)
    with np.errstate(divide="ignore", invalid="ignore"):
        if cfg.coord == "asymmetric":
            x = o / s
        elif cfg.coord == "align_corners":
            length = s * f(n_in)
            x = np.zeros_like(o) if length == f(1) else o * f(n_in - 1) / (length - f(1))
        else:
            x = (o + f(0.5)) / s - f(0.5)
            if cfg.coord == "pytorch_half_pixel" and n_out <= 1:
                x = np.zeros_like(o)
    x = x.astype(f)
    fl = np.floor(x)
    i0, r = fl.astype(np.int64), (x - fl).astype(f)
    if cfg.mode == "nearest":
        up = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5, "floor": np.zeros_like(r, bool),
              "ceil": np.ones_like(r, bool)}[cfg.nearest_mode] & (r != 0)
        idx, w = (i0 + up)[:, None], np.ones((n_out, 1), f)
    elif cfg.mode == "linear":
        idx, w = np.stack([i0, i0 + 1], 1), np.stack([f(1) - r, r], 1)
    else:
        a = f(cfg.cubic_coeff_a)
        t = [r + f(1), r, f(1) - r, f(2) - r]
        w = np.stack([((a * t[0] - f(5) * a) * t[0] + f(8) * a) * t[0] - f(4) * a,
                      ((a + f(2)) * t[1] - (a + f(3))) * t[1] * t[1] + f(1),
                      ((a + f(2)) * t[2] - (a + f(3))) * t[2] * t[2] + f(1),
                      ((a * t[3] - f(5) * a) * t[3] + f(8) * a) * t[3] - f(4) * a], 1)
        idx = i0[:, None] + np.arange(-1, 3)[None, :]
    return np.clip(idx, 0, n_in - 1), w.astype(f)


def resize_reference(cfg: ResizeConfig, x: np.ndarray) -> np.ndarray:
    """y = Resize(x) in numpy from :func:`resize_taps`, one spatial dim after another (the operation is
    separable), accumulated in float64. x: an array of shape ``cfg.x`` (NCHW order)."""
    y = np.asarray(x, np.float64)
    for d in range(cfg.nsp):
        idx, w = resize_taps(cfg, d)
        g = np.take(y, idx, axis=2 + d)  # (..., out, T, ...)
        shape = [1] * g.ndim
        shape[2 + d], shape[3 + d] = w.shape
        y = (g * w.reshape(shape).astype(np.float64)).sum(axis=3 + d)
    return y


def touched(cfg: ResizeConfig) -> int:
    """Elements of x that some output reads with a nonzero weight: N * C * the product over spatial dims
    of the distinct taps with nonzero weight (a downsampling nearest resize skips most of x)."""
    n = cfg.x[0] * cfg.x[1]
    for d in range(cfg.nsp):
        idx, w = resize_taps(cfg, d)
        n *= len(np.unique(idx[w != 0]))
    return n


def _scale_list(v, rank: int, what: str) -> list[float]:
    vals = [float(s) for s in np.asarray(v).reshape(-1)]
    if len(vals) != rank:
        raise Unsupported(f"{what} has {len(vals)} values for a rank-{rank} input")
    return vals


def _map_resize(node, ctx, attrs):
    """ONNX Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample (7: attribute scales;
    9: X, scales). Resize-10 and Upsample are asymmetric with nearest rounding down (Upsample's spec:
    ``output[i] = input[floor(i / scale)]``; the ONNX version converter's Resize 10 -> 11 adapter)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    op, opset = node.op_type, ctx.opset
    if not 3 <= len(x) <= 5:
        raise Unsupported(f"{op} of a rank-{len(x)} tensor (benanza times (N, C, 1 to 3 spatial dims))")
    mode = str(attrs.get("mode", "nearest")).lower()
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
    if op == "Upsample" or opset < 11:
        coord, nearest = "asymmetric", "floor"
        if op == "Upsample" and "scales" in attrs:
            scales = _scale_list(attrs["scales"], len(x), "scales")
        else:
            v = ctx.value(node.input[1]) if len(node.input) > 1 and node.input[1] else None
            if v is None:
                raise Unsupported(f"{op} scales are not a constant")
            scales = _scale_list(v, len(x), "scales")
    else:
        coord = str(attrs.get("coordinate_transformation_mode", "half_pixel"))
        nearest = str(attrs.get("nearest_mode", "round_prefer_floor"))
        if coord not in COORDS:
            raise Unsupported(f"Resize coordinate_transformation_mode {coord} (benanza times {', '.join(COORDS)})")
        if int(attrs.get("antialias", 0)):
            raise Unsupported("Resize with antialias=1 (a wider filter when downsampling)")
        if int(attrs.get("exclude_outside", 0)) and mode == "cubic":
            raise Unsupported("Resize with exclude_outside=1")
        if attrs.get("axes") is not None and sorted(int(a) % len(x) for a in attrs["axes"]) != list(range(len(x))):
            raise Unsupported("Resize with axes (a subset of the dims)")
        if str(attrs.get("keep_aspect_ratio_policy", "stretch")) != "stretch":
            raise Unsupported("Resize with keep_aspect_ratio_policy other than stretch")
        sc = ctx.value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        sz = ctx.value(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        if sc is not None and np.asarray(sc).size:
            scales = _scale_list(sc, len(x), "scales")
        elif sz is not None and np.asarray(sz).size:
            scales = [o / i if i else 1.0 for o, i in zip(y, x)]
        else:
            raise Unsupported("Resize scales and sizes are not constants")
    if mode not in MODES:
        raise Unsupported(f"{op} mode {mode} (benanza times {', '.join(MODES)})")
    if mode == "nearest" and nearest not in NEAREST_MODES:
        raise Unsupported(f"Resize nearest_mode {nearest}")
    if x[:2] != y[:2] or any(s != 1.0 for s in scales[:2]):
        raise Unsupported(f"{op} that resizes the batch or channel dim (scales {scales[:2]})")
    if any(s <= 0 or not math.isfinite(s) for s in scales):
        raise Unsupported(f"{op} scales {scales} (each must be a positive number)")
    if any(o != math.floor(i * s + 1e-9) and o != round(i * s) for i, o, s in zip(x[2:], y[2:], scales[2:])):
        raise Unsupported(f"{op} output {y} is not the input {x} times scales {scales}")
    return ResizeConfig(x=x, y=y, mode=mode, coord=coord, nearest_mode=nearest if mode == "nearest" else "",
                        cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)) if mode == "cubic" else -0.75,
                        scales=tuple(float(np.float32(s)) for s in scales[2:]))


@dataclass(frozen=True)
class ResizeCase(Case):
    """One row of ``templates/resize.cpp.j2``'s case table (the backward kind's too): the fields of its C++
    ``ResizeCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against
    the template)."""

    nsp: CppValue
    n: CppValue
    c: CppValue
    size_in: CppValue
    size_out: CppValue
    scale: CppValue
    mode: CppValue
    coord: CppValue
    nearest: CppValue
    cubic_a: CppValue
    label: CppValue


def resize_case(cfg: ResizeConfig, job: Job) -> ResizeCase:
    """The case of ``cfg`` (the backward kind's too: the same kernel parameters)."""
    label = f"{cfg.nearest_mode if cfg.mode == 'nearest' else cfg.mode} {cfg.coord}"
    return ResizeCase(job=job_init(job), nsp=cfg.nsp, n=cfg.x[0], c=cfg.x[1], size_in=c_array(cfg.x[2:], 3, 1),
                      size_out=c_array(cfg.y[2:], 3, 1), scale="{" + ", ".join(cpp_num(float(s)) + "f" for s in cfg.scales)
                      + "}", mode=MODES.index(cfg.mode), coord=COORDS.index(cfg.coord),
                      nearest=NEAREST_MODES.index(cfg.nearest_mode) if cfg.nearest_mode else 0,
                      cubic_a=cpp_num(float(cfg.cubic_coeff_a)) + "f", label=cpp_string(label))


def interpolate_args(cfg: ResizeConfig) -> tuple[str, dict]:
    """The ATen op and the keyword arguments of ``F.interpolate`` that compute ``cfg`` (what PyTorch's
    ``upsample_*`` kernels compute; aten/src/ATen/native/UpSample.h): nearest asymmetric floor is
    mode "nearest"; nearest half_pixel round_prefer_ceil is "nearest-exact" (floor((o + 0.5) * in /
    out)); linear and cubic (2-D, A = -0.75) half_pixel are align_corners=False, align_corners is
    align_corners=True. The output size is given as the scales where ``floor(in * s)`` gives it, so
    PyTorch divides by the same scale (recompute_scale_factor=False), else as a size. Raises
    NotSupported for the others (PyTorch has no call that computes them exactly)."""
    nsp = cfg.nsp
    if [math.floor(i * s) for i, s in zip(cfg.x[2:], cfg.scales)] == list(cfg.y[2:]):
        size = {"scale_factor": tuple(cfg.scales), "recompute_scale_factor": False}
    else:
        size = {"size": tuple(cfg.y[2:])}
    if cfg.mode == "nearest":
        if cfg.coord == "asymmetric" and cfg.nearest_mode == "floor":
            return f"upsample_nearest{nsp}d", {**size, "mode": "nearest"}
        if cfg.coord in ("half_pixel", "pytorch_half_pixel") and cfg.nearest_mode == "round_prefer_ceil":
            return f"_upsample_nearest_exact{nsp}d", {**size, "mode": "nearest-exact"}
        raise NotSupported(f"nearest {cfg.nearest_mode} with {cfg.coord} (PyTorch: floor asymmetric or "
                           "round_prefer_ceil half_pixel)")
    if cfg.coord == "asymmetric":
        raise NotSupported(f"{cfg.mode} asymmetric (PyTorch: half_pixel or align_corners)")
    corners = cfg.coord == "align_corners"
    if cfg.mode == "cubic":
        if nsp != 2 or cfg.cubic_coeff_a != -0.75:
            raise NotSupported(f"cubic of {nsp} spatial dims, A = {cfg.cubic_coeff_a} (PyTorch: bicubic 2-D, A = -0.75)")
        return "upsample_bicubic2d", {**size, "mode": "bicubic", "align_corners": corners}
    name = {1: ("upsample_linear1d", "linear"), 2: ("upsample_bilinear2d", "bilinear"),
            3: ("upsample_trilinear3d", "trilinear")}[nsp]
    return name[0], {**size, "mode": name[1], "align_corners": corners}


def _resize(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    op, kw = interpolate_args(cfg)
    x = c.fmt(c.randn(cfg.x))
    return Candidate(f"torch:aten::{op}", algo_label(c), lambda: F.interpolate(x, **kw), numel(cfg.y))


def _min_bytes(cfg: ResizeConfig, ib: int, ob: int) -> int:
    """The elements of x some output reads (:func:`touched`) read once, y written once (bytes;
    Williams et al., "Roofline", CACM 2009: compulsory traffic)."""
    return ib * touched(cfg) + ob * numel(cfg.y)


def _nhwc_job(cfg: ResizeConfig, neighbour: bool) -> bool:
    """Every config: an image with channels."""
    return True


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ResizeConfig(x=(1, 256, 32, 32), y=(1, 256, 64, 64), mode="nearest", coord="asymmetric",
                         nearest_mode="floor", scales=(2.0, 2.0)),
    name="Resize", config=ResizeConfig, template="resize.cpp.j2", case=resize_case, min_bytes=_min_bytes,
    torch=_resize, onnx={"Resize": _map_resize, "Upsample": _map_resize}, typed_ops=(), fused_from=(),
    aten={op: ("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
               "aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d", "aten::_upsample_nearest_exact3d",
               "aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d",
               "aten::upsample_bicubic2d", "aten::interpolate") for op in ("Resize", "Upsample")},
    nhwc=True, image=True, nhwc_job=_nhwc_job)
