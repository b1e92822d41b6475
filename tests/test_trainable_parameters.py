"""The optimizer's parameter count (issue 26): parameters reached through view and broadcast ops
(``benanza.processing.training.VIEW_OPS``) count once, by their own name; ViT's class token, a
(1, 1, 768) parameter expanded to the batch and concatenated with the patches, is one of them."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza.processing.training import trainable_parameters
from conftest import REPO

#: torchvision 0.26's vit_b_16: sum(p.numel() for p in vit_b_16().parameters())
TORCHVISION_VIT_B_16 = 86_567_656


@pytest.mark.parametrize("name", ["vit_b_16_dynamic.onnx", "vit_b_16_fixed1.onnx"])
def test_vit_b_16_counts_its_class_token(name):
    """benanza counted 86,519,040 before the class token (768) was found behind its Expand (the
    symbolic-batch export) or as the (1, 1, 768) initializer a Concat reads (the batch-1 export, where
    the exporter folded the Expand). The remaining 47,848 are parameters the weight-stripped export no
    longer has as their own tensors: torch.export merged initializers of equal value and dropped zero
    biases, as the file shows (every LayerNormalization reads encoder_layer_0.ln_1's weight and bias,
    the Gemms of out_proj and of the head have no C input, the Conv no B):

    - 25 LayerNorms (2 per encoder layer and the final one) * (weight + bias) = 50 tensors of 768 in
      torchvision, 2 in the file: 48 * 768 = 36,864;
    - the 12 attention out_proj biases (768 each): 9,216;
    - the head's bias (1000): 1,000;
    - conv_proj's bias (768): 768.

    36,864 + 9,216 + 1,000 + 768 = 47,848 = 86,567,656 - 86,519,808."""
    shapes = trainable_parameters(REPO / "tests" / "data" / name)
    total = sum(math.prod(s) for s in shapes)
    assert (1, 1, 768) in shapes and total == 86_519_040 + 768
    assert TORCHVISION_VIT_B_16 - total == 48 * 768 + 12 * 768 + 1000 + 768


def test_a_parameter_behind_views_counts_once(tmp_path):
    """A (1, 1, 8) token expanded to the batch and concatenated with the data; a (4, 8) weight read
    through Reshape -> Unsqueeze -> Squeeze by a MatMul and through a Transpose by another (a tied
    weight: once); a float constant reshaped and read only by a Shape is no parameter."""
    inits = [numpy_helper.from_array(np.zeros((1, 1, 8), np.float32), "tok"),
             numpy_helper.from_array(np.zeros((4, 8), np.float32), "w"),
             numpy_helper.from_array(np.zeros((5, 5), np.float32), "buf"),
             numpy_helper.from_array(np.array([3, 1, 8], np.int64), "tshape"),
             numpy_helper.from_array(np.array([8, 4], np.int64), "wshape"),
             numpy_helper.from_array(np.array([25], np.int64), "flat"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0")]
    nodes = [helper.make_node("Expand", ["tok", "tshape"], ["tok_b"]),
             helper.make_node("Concat", ["tok_b", "x"], ["xc"], axis=1),
             helper.make_node("Reshape", ["w", "wshape"], ["w1"]),
             helper.make_node("Unsqueeze", ["w1", "ax0"], ["w2"]),
             helper.make_node("Squeeze", ["w2", "ax0"], ["w3"]),
             helper.make_node("MatMul", ["xc", "w3"], ["h"]),
             helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "w"], ["y"]),
             helper.make_node("MatMul", ["y", "wt"], ["z"]),
             helper.make_node("Reshape", ["buf", "flat"], ["bufr"]),
             helper.make_node("Shape", ["bufr"], ["s"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 8])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("s", TensorProto.INT64, None)], inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert trainable_parameters(path) == [(1, 1, 8), (4, 8)]
