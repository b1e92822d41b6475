"""What the kinds' PyTorch candidates share (``benanza.profiles.torch_candidates`` times them): the
candidate record, the builder context and the exception for a config PyTorch cannot run exactly."""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Callable

from benanza.kinds.backend import Backend
from benanza.kinds.base import LayerConfig


#: the ``call`` prefix of these measurements (their backend's, :attr:`benanza.kinds.backend.Backend.call_prefix`)
CALL_PREFIX = Backend.TORCH_EAGER.call_prefix


class NotSupported(Exception):
    """PyTorch has no call that computes this config exactly (recorded as not_supported)."""


@dataclass
class Candidate:
    """One framework call for a config: ``fn()`` runs it on preallocated inputs and returns its
    output; ``out_numel`` the element count it must produce (the config's output). ``variants``:
    other ways the framework runs the same config (the optimizer's for-each step beside its fused
    one), each timed as its own measurement of the job (``call`` and ``algorithm`` tell them apart).
    ``backend``: the runtime that runs ``fn`` (PyTorch eager for the kinds' builders), stored with
    each of its measurements."""

    call: str
    algorithm: str
    fn: Callable[[], object]
    out_numel: int
    note: str = ""
    details: dict = field(default_factory=dict)
    variants: list["Candidate"] = field(default_factory=list)
    backend: Backend = Backend.TORCH_EAGER


@dataclass
class Ctx:
    """What a builder needs: the config, torch, the device, the storage dtype and memory format."""

    cfg: LayerConfig
    torch: object
    device: object
    dtype: object
    nhwc: bool

    def randn(self, shape, dtype=None, positive: bool = False):
        t = self.torch.randn(tuple(shape), device=self.device, dtype=self.torch.float32)
        if positive:
            t = t.abs() + 0.5
        return t.to(dtype or self.dtype)

    def typed(self, shape, type_name: str = "", positive: bool = False):
        """Random values of ``type_name`` (a key of :data:`benanza.kinds.STORED_TYPES`, or "" for the
        precision's float type): bools half true, integers in [1, 8) (valid shifts and divisors)."""
        torch = self.torch
        if not type_name:
            return self.randn(shape, positive=positive)
        if type_name == "bool":
            return torch.randint(0, 2, tuple(shape), device=self.device).bool()
        return torch.randint(1, 8, tuple(shape), device=self.device, dtype=getattr(torch, type_name))

    def fmt(self, t):
        """Channels-last memory for the image tensors of an NHWC job (rank 4 or 5)."""
        if not self.nhwc or t.dim() not in (4, 5):
            return t
        mf = self.torch.channels_last if t.dim() == 4 else self.torch.channels_last_3d
        return t.contiguous(memory_format=mf)


def functional(c: Ctx):
    return c.torch.nn.functional


def algo_label(c: Ctx, extra: str = "") -> str:
    base = "channels_last" if c.nhwc else "contiguous"
    return f"{base}{', ' + extra if extra else ''}"
