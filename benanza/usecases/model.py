"""``benanza layers`` and ``benanza generate``: a model processed into layers, and the C++ suite of its
unique layers."""
from __future__ import annotations

from pathlib import Path

from benanza.errors import UsageError
from benanza.generation.generator import Suite, generate as gen, parse_kinds, training_folds_note
from benanza.processing.cache import process
from benanza.processing.model import ModelLayers
from benanza.spec import conv_precision, parse_layouts, parse_precisions
from benanza.usecases.progress import SILENT, Progress


def layers(model: Path, batches: list[int], dims: dict, batch_dim: int | None,
           progress: Progress = SILENT) -> list[ModelLayers]:
    """``model`` processed at each batch (through the processed-model cache); its notices to ``progress``."""
    mls = []
    for b in batches:
        ml = process(model, b, dims, batch_dim)
        for n in ml.notices:
            progress.notice(n)
        mls.append(ml)
    return mls


def generate(model: Path, batches: list[int], dtype: str, output: Path, layout: str, kinds: str | None,
             conv_tf32: bool, dims: dict, batch_dim: int | None, train: bool, optimizer: str,
             progress: Progress = SILENT) -> tuple[Suite, str]:
    """The C++ benchmark suite (and its CMake project) of ``model``'s unique layers into ``output``;
    returns the suite and the note on a training step's folded layers (empty without)."""
    precisions = parse_precisions(dtype)
    lays = parse_layouts(layout)
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: exists and is not a folder; give a folder for the suite")
    mls = layers(model, batches, dims, batch_dim, progress)
    suite = gen(mls, precisions, output, lays, parse_kinds(kinds), conv_precision(conv_tf32, precisions),
                train=train, optimizer=optimizer)
    return suite, training_folds_note(mls, train)
