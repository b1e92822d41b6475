"""``benanza profile``: an ONNX model run in PyTorch under torch.profiler (and cuDNN/cuBLASLt logging)
into a profile folder, or a profile folder read, its kernels joined with the model's layers."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benanza.profiles import capture_profile, load_profile
from benanza.profiles.profile import Profile
from benanza.usecases.progress import SILENT, Progress


@dataclass
class ProfileResult:
    """The joined :class:`benanza.profiles.profile.Profile`, its folder, and whether this command
    wrote it (``captured``) or read it."""

    profile: Profile
    folder: Path
    captured: bool


def profile(model: Path, batch: int | None, dtype: str, output: Path | None, load: Path | None, dims: dict,
            batch_dim: int | None, capture: dict, progress: Progress = SILENT) -> ProfileResult:
    """Profile ``model`` at ``batch`` (default 1) in framework data type ``dtype`` (fp32: TF32 off)
    into ``output`` (default ``./profile-MODEL-bN-DTYPE``) with the :func:`benanza.profiles.capture_profile`
    settings ``capture``, or read the profile folder ``load``; then join it with the model's layers."""
    if load is None:
        b = 1 if batch is None else batch
        folder = output or Path(f"profile-{model.stem}-b{b}-{dtype}")
        capture_profile(model, b, dtype, folder, dims=dims, batch_dim=batch_dim, say=progress.say, **capture)
    else:
        folder = load
    return ProfileResult(load_profile(folder, model, batch, dims, batch_dim), folder, load is None)
