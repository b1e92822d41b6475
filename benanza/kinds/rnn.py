"""RNN layers. ONNX LSTM / GRU (one layer per node): cudnnRNNForward in inference mode (cuDNN 9 RNN API:

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import numpy as np
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import Unsupported, need


#: recurrent cells cudnnRNNForward computes: gates per cell (LSTM: input, forget, cell, output;
#: GRU: reset, update, new)
RNN_GATES = {"lstm": 4, "gru": 3}


RNN_DIRECTIONS = ("forward", "reverse", "bidirectional")


@dataclass(frozen=True)
class RNNConfig(LayerConfig):
    """ONNX LSTM / GRU (one layer per node): cudnnRNNForward in inference mode (cuDNN 9 RNN API:
    cudnnSetRNNDescriptor_v8, RNN data descriptors, cudnnGetRNNTempSpaceSizes with
    CUDNN_FWD_MODE_INFERENCE), algorithms STANDARD, PERSIST_STATIC and PERSIST_STATIC_SMALL_H.

    cell: "lstm" or "gru"; seq_len, input_size, hidden_size, batch: the ONNX sizes (X is
    (seq_len, batch, input_size) for layout "seq_major", (batch, seq_len, input_size) for
    "batch_major"); num_layers: 1 (an ONNX node is one layer); direction: "forward", "reverse"
    (timed as forward: the same work on the reversed sequence) or "bidirectional"; bias: the ONNX
    B input (W and R biases: CUDNN_RNN_DOUBLE_BIAS); linear_before_reset: the GRU attribute (cuDNN
    computes the linear_before_reset=1 formula; 0 is timed with it, same FLOPs and traffic, and
    the measurement says so).

    Output Y: (seq_len, num_directions, batch, hidden_size) ("seq_major"; ONNX's layout 0) or
    (batch, seq_len, num_directions, hidden_size) ("batch_major", layout 1).
    FLOPs (the two GEMMs per gate; the elementwise cell updates are not counted):
    2 * seq_len * batch * gates * hidden_size * (input_size + hidden_size) per direction, gates = 4
    (LSTM) or 3 (GRU) (cuDNN developer guide, "Recurrent neural networks": each gate is
    W x_t + R h_{t-1}; ONNX operator docs, LSTM / GRU equations).
    """

    kind: ClassVar[str] = "RNN"
    tensor_cores: ClassVar[bool] = True
    cell: str
    seq_len: int
    input_size: int
    hidden_size: int
    batch: int = 1  # a field with a default, as GemmConfig's: it replaces the base class's property
    num_layers: int = 1
    direction: str = "forward"
    bias: bool = True
    layout: str = "seq_major"
    linear_before_reset: bool = False

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def gates(self) -> int:
        return RNN_GATES[self.cell]

    def input_shapes(self):
        if self.layout == "batch_major":
            return [(self.batch, self.seq_len, self.input_size)]
        return [(self.seq_len, self.batch, self.input_size)]

    def output_shape(self):
        if self.layout == "batch_major":
            return (self.batch, self.seq_len, self.num_directions, self.hidden_size)
        return (self.seq_len, self.num_directions, self.batch, self.hidden_size)

    def flops(self):
        per_dir = 2 * self.seq_len * self.batch * self.gates * self.hidden_size * (self.input_size + self.hidden_size)
        return self.num_layers * self.num_directions * per_dir

    def describe(self):
        d = {"forward": "", "reverse": " rev", "bidirectional": " bidir"}[self.direction]
        lbr = " lbr0" if self.cell == "gru" and not self.linear_before_reset else ""
        lay = " batch-major" if self.layout == "batch_major" else ""
        return (f"RNN({self.cell.upper()} seq{self.seq_len} b{self.batch} in{self.input_size} "
                f"h{self.hidden_size}{d}{'' if self.bias else ' nobias'}{lay}{lbr})")


#: ONNX default activations per direction of each recurrent cell (what cuDNN's cells compute)
_RNN_DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}


def _map_rnn(node, ctx, attrs):
    """ONNX LSTM / GRU -> :class:`benanza.kinds.RNNConfig` (cudnnRNNForward).

    Inputs X, W, R[, B, sequence_lens, initial_h(, initial_c, P)]; W: (num_directions,
    gates*hidden, input), R: (num_directions, gates*hidden, hidden). What cuDNN cannot compute is
    unsupported with the reason: other activations, clip, input_forget, peepholes, sequence
    lengths that differ from the padded length.
    """
    op = node.op_type
    x = need(ctx.shape(node.input[0]), "input X")
    w = need(ctx.shape(node.input[1]), "weight W")
    if len(x) != 3 or len(w) != 3:
        raise Unsupported(f"{op} with a rank-{len(x)} X or a rank-{len(w)} W (expected 3)")
    direction = str(attrs.get("direction", "forward")).lower()
    if direction not in RNN_DIRECTIONS:
        raise Unsupported(f"{op} direction {direction!r}")
    num_dir = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size", 0)) or None
    gates = RNN_GATES[op.lower()]
    if w[0] != num_dir or w[1] % gates:
        raise Unsupported(f"{op} weight W {list(w)} does not fit {num_dir} direction(s) of {gates} gates")
    hidden = hidden or w[1] // gates
    if w[1] != gates * hidden:
        raise Unsupported(f"{op} weight W {list(w)} does not fit hidden_size {hidden}")
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise Unsupported(f"{op} layout {layout}")
    seq, batch = (x[0], x[1]) if layout == 0 else (x[1], x[0])
    acts = attrs.get("activations")
    if acts is not None:
        want = _RNN_DEFAULT_ACTIVATIONS[op] * num_dir
        names = tuple((a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a)).lower() for a in acts)
        if names != want:
            raise Unsupported(f"{op} activations {list(acts)}: cuDNN computes only the defaults "
                              f"{list(_RNN_DEFAULT_ACTIVATIONS[op])}")
    if attrs.get("clip") is not None:
        raise Unsupported(f"{op} with clip: cuDNN clips the cell state, ONNX the gate inputs")
    if op == "LSTM" and int(attrs.get("input_forget", 0)):
        raise Unsupported("LSTM with input_forget=1 (coupled input and forget gates): no cuDNN cell")
    if op == "LSTM" and len(node.input) > 7 and node.input[7]:
        raise Unsupported("LSTM with peephole weights P: no cuDNN cell")
    if len(node.input) > 4 and node.input[4]:
        lens = ctx.value(node.input[4])
        if lens is None or any(int(v) != seq for v in np.asarray(lens).reshape(-1)):
            raise Unsupported(f"{op} with sequence_lens that are not all {seq} (variable-length sequences)")
    if not node.output or not node.output[0]:
        raise Unsupported(f"{op} without its Y output (only Y_h/Y_c): not mapped")
    bias = len(node.input) > 3 and bool(node.input[3])
    lbr = bool(int(attrs.get("linear_before_reset", 0))) if op == "GRU" else False
    return RNNConfig(cell=op.lower(), seq_len=int(seq), batch=int(batch), input_size=int(x[2]),
                       hidden_size=int(hidden), num_layers=1, direction=direction, bias=bias,
                       layout="batch_major" if layout == 1 else "seq_major", linear_before_reset=lbr)


def rnn_note(cfg: RNNConfig) -> str:
    """How the timed cudnnRNNForward differs from the ONNX node ("" when it does not)."""
    notes = []
    if cfg.cell == "gru" and not cfg.linear_before_reset:
        notes.append("ONNX GRU linear_before_reset=0 timed as cuDNN's GRU, which computes the "
                     "linear_before_reset=1 formula: same FLOPs and memory traffic, different result")
    if cfg.direction == "reverse":
        notes.append("direction reverse timed as forward (cuDNN has no reverse-only mode): the same work")
    if cfg.direction == "bidirectional":
        notes.append("bidirectional: cuDNN writes y as [seq, batch, 2*hidden], ONNX's Y is "
                     "[seq, 2, batch, hidden]: the transpose between them is not timed")
    return "; ".join(notes)


@dataclass(frozen=True)
class RnnCase(Case):
    """One row of ``templates/rnn.cpp.j2``'s case table: the fields of its C++ ``RnnCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    cell: CppValue
    seq_len: CppValue
    batch: CppValue
    input_size: CppValue
    hidden_size: CppValue
    num_layers: CppValue
    bidirectional: CppValue
    bias: CppValue
    batch_major: CppValue
    note: CppValue


def _rnn_case(cfg: RNNConfig, job: Job) -> RnnCase:
    return RnnCase(job=job_init(job), cell={"lstm": "CUDNN_LSTM", "gru": "CUDNN_GRU"}[cfg.cell], seq_len=cfg.seq_len, batch=cfg.batch, input_size=cfg.input_size, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, bidirectional=cpp_num(cfg.direction == "bidirectional"), bias=cpp_num(cfg.bias), batch_major=cpp_num(cfg.layout == "batch_major"), note=cpp_string(rnn_note(cfg)))


def _rnn(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cfg.cell]
    m = cls(cfg.input_size, cfg.hidden_size, num_layers=cfg.num_layers, bias=cfg.bias,
            batch_first=cfg.layout == "batch_major", bidirectional=cfg.direction == "bidirectional")
    m = m.to(device=c.device, dtype=c.dtype).eval()
    m.flatten_parameters()
    x = c.randn(cfg.input_shapes()[0])
    notes = []
    if cfg.direction == "reverse":
        notes.append("reverse direction timed forward (the same work)")
    if cfg.cell == "gru" and not cfg.linear_before_reset:
        notes.append("GRU linear_before_reset=0 timed as PyTorch's GRU (linear_before_reset=1, the same work)")
    return Candidate(f"torch:aten::{cfg.cell}", "cudnn", lambda: m(x)[0], numel(cfg.output_shape()), "; ".join(notes))


def _min_bytes(cfg: RNNConfig, ib: int, ob: int) -> int:
    """The input sequence, every gate's weights and biases read once, the output written once (bytes)."""
    nd = cfg.num_directions
    w = nd * cfg.gates * cfg.hidden_size * (cfg.input_size + cfg.hidden_size)
    bias = nd * 2 * cfg.gates * cfg.hidden_size if cfg.bias else 0
    return ib * (numel(cfg.input_shapes()[0]) + w + bias) + ob * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=RNNConfig(cell='lstm', seq_len=35, input_size=1024, hidden_size=1024, batch=1, num_layers=1,
        direction='forward', bias=True, layout='seq_major', linear_before_reset=False),
    name="RNN", config=RNNConfig, template="rnn.cpp.j2", case=_rnn_case, min_bytes=_min_bytes,
    torch=_rnn, onnx={"GRU": _map_rnn, "LSTM": _map_rnn},
    typed_ops=(), fused_from=(),
    aten={"GRU": ('aten::_cudnn_rnn', 'aten::gru'), "LSTM": ('aten::_cudnn_rnn', 'aten::lstm')},
    nhwc=False, image=False)
