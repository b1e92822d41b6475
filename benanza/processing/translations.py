"""ONNX translations of the PyTorch ops torch.onnx has none for, given to ``torch.onnx.export(...,
dynamo=True, custom_translation_table=table())`` by :func:`benanza.processing.modules.export_onnx`.

They are the ops of a mixture-of-experts layer as transformers 5 runs it by default
(``grouped_mm_experts_forward``, ``transformers/integrations/moe.py``):

* ``torch.nn.functional.grouped_mm`` / ``torch._grouped_mm`` (``aten::_grouped_mm``, bf16) and
  transformers' own ``transformers::grouped_mm_fallback`` (its per-expert ``torch.mm`` loop, which
  torch.export sees for other dtypes): one ``benanza.GroupedMatMul(x [S, K], w [E, K, N], offs [E])
  -> y [S, N]`` node, timed as the ``GroupedGemm`` kind (:mod:`benanza.kinds.grouped_gemm`);
* ``aten::histc`` (the tokens per expert, ``histc(expert_ids, bins=E, min=0, max=E-1)``): standard ONNX
  ops, ``ScatterElements(reduction="add")`` of ones onto zeros of ``bins``.

Each translation is a plain function of onnxscript ops: the exporter traces it, so its nodes land in
the graph (no model-local function) with the shapes torch.export recorded for the op's outputs.
"""
from __future__ import annotations

from benanza.kinds.grouped_gemm import BENANZA_DOMAIN


def table() -> dict:
    """``{torch op overload: translation}`` for the ops above that this PyTorch and transformers have
    (an op a version lacks is left out). Raises ImportError without onnxscript (the dynamo
    exporter's own requirement)."""
    import torch

    fns = _functions()
    out = {torch.ops.aten.histc.default: fns["histc"]}
    if hasattr(torch.ops.aten, "_grouped_mm"):
        out[torch.ops.aten._grouped_mm.default] = fns["grouped_mm"]
    try:
        import transformers.integrations.moe  # noqa: F401 (registers transformers::grouped_mm_fallback)

        out[torch.ops.transformers.grouped_mm_fallback.default] = fns["fallback"]
    except (ImportError, AttributeError, RuntimeError):
        pass
    return out


def _functions() -> dict:
    """The translations (built on first use: onnxscript is imported only for a dynamo export)."""
    import onnx
    import onnxscript
    from onnxscript import opset18 as op

    param = onnx.defs.OpSchema.FormalParameter
    schema = onnx.defs.OpSchema(
        "GroupedMatMul", BENANZA_DOMAIN, 1,
        "Rows offs[e-1]:offs[e] of input times weight[e] (a mixture of experts' grouped matmul).",
        inputs=[param("input", "T"), param("weight", "T"), param("offs", "I")], outputs=[param("output", "T")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "float data"),
                          ("I", ["tensor(int32)", "tensor(int64)"], "cumulative row counts")])
    grouped = onnxscript.values.Op(onnxscript.values.Opset(BENANZA_DOMAIN, 1), "GroupedMatMul", schema)

    def fallback(input, weight, offs):
        """transformers::grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor."""
        return grouped(input, weight, offs)

    def grouped_mm(self, mat2, offs=None, bias=None, out_dtype: int = -1):
        """aten::_grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None) in its mixture-of-experts
        form (2-D self [S, K], 3-D mat2 [E, K, N], offs [E], no bias); the exporter reports another."""
        if offs is None or bias is not None:
            raise NotImplementedError("aten::_grouped_mm: only the 2-D x 3-D form with offs and no bias")
        return grouped(self, mat2, offs)

    def histc(self, bins: int = 100, min: float = 0.0, max: float = 0.0):
        """aten::histc(self, bins, min, max) for a fixed range min < max (PyTorch's definition: bin of x
        = floor((x - min) * bins / (max - min)), x == max in the last bin, x outside [min, max] not
        counted): ScatterElements(reduction="add") of ones (zeros out of range) onto zeros [bins]."""
        if not min < max:
            raise NotImplementedError("aten::histc over the data's own range (min >= max) is not translated")
        zero = op.CastLike(op.Constant(value_float=0.0), self)
        one = op.CastLike(op.Constant(value_float=1.0), self)
        lo = op.CastLike(op.Constant(value_float=float(min)), self)
        hi = op.CastLike(op.Constant(value_float=float(max)), self)
        scale = op.CastLike(op.Constant(value_float=bins / (max - min)), self)
        last = op.CastLike(op.Constant(value_float=float(bins - 1)), self)
        idx = op.Min(op.Floor(op.Mul(op.Sub(self, lo), scale)), last)
        valid = op.And(op.GreaterOrEqual(self, lo), op.LessOrEqual(self, hi))
        ids = op.Cast(op.Where(valid, idx, zero), to=onnx.TensorProto.INT64)
        ones = op.Where(valid, one, zero)
        counts = op.Expand(zero, op.Constant(value_ints=[bins]))
        return op.ScatterElements(counts, ids, ones, axis=0, reduction="add")

    return {"fallback": fallback, "grouped_mm": grouped_mm, "histc": histc}
