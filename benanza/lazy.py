"""Modules imported at their first use, so that a command imports only what its work needs: ``benanza
--help`` neither the layer kinds nor SQLAlchemy, and ``benanza analyze`` of a model whose processed layers
are cached not onnx (half a second at start, most of it ml_dtypes; issue "Answers in seconds").
"""
from __future__ import annotations

import importlib


class LazyModule:
    """Module ``name``, imported (``importlib.import_module``) at the first attribute read; every read
    after that is the module's own attribute. ``from x import y`` of a lazy module would import it at
    once: name the attribute at its use instead (``numpy_helper = LazyModule("onnx.numpy_helper")``)."""

    def __init__(self, name: str):
        self._lazy_name = name
        self._lazy_module = None

    def __getattr__(self, attr: str):
        mod = self._lazy_module
        if mod is None:
            mod = self._lazy_module = importlib.import_module(self._lazy_name)
        return getattr(mod, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"
