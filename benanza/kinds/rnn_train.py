"""RNNTrain layers: an ONNX LSTM / GRU's calls in a training step (docs/training.md), through cuDNN 9's RNN API
(the v8 functions): the training-mode forward (``cudnnRNNForward`` with CUDNN_FWD_MODE_TRAINING,
which writes the reserve space the backward reads), the data gradient (``cudnnRNNBackwardData_v8``:
dX, dHx and, for an LSTM, dCx) and the weight gradient (``cudnnRNNBackwardWeights_v8`` with
CUDNN_WGRAD_MODE_ADD: dW, dR and the biases' gradients, accumulated into the weight-gradient space as
PyTorch's ``_cudnn_rnn_backward_weight`` does into a zeroed buffer).

One kind with a field (:attr:`RNNTrainConfig.call`) for the three calls: they share every parameter,
the descriptors and the reserve space. Each backward job runs the training forward once before its
timing (and the weight-gradient job the data gradient once too: cuDNN's documentation of
cudnnRNNBackwardWeights_v8 requires it after cudnnRNNBackwardData_v8, whose intermediate results in
the reserve space it reads), so the reserve space the timed call reads is a real one.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate, the ATen ops of the profile join, and its place as the RNN kind's backward
(:func:`rnn_backward`, installed through ``Kind.backward_of``). It maps no ONNX op.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported
from benanza.kinds.rnn import RNN_DIRECTIONS, RNN_GATES, RNNConfig, rnn_note

#: the calls of :class:`RNNTrainConfig`, each named by the training phase it belongs to
#: (:data:`benanza.kinds.TRAINING_PHASES`), and the C++ enumerator the template switches on
RNN_TRAIN_CALLS = {"forward": "RnnTrainCall::kForward", "backward_data": "RnnTrainCall::kBackwardData",
                   "backward_weight": "RnnTrainCall::kBackwardWeights"}
#: PyTorch's cudnnRNNMode_t numbers of the cells (aten/src/ATen/native/cudnn/RNN.cpp takes cuDNN's
#: enum: CUDNN_RNN_RELU 0, CUDNN_RNN_TANH 1, CUDNN_LSTM 2, CUDNN_GRU 3)
_TORCH_MODE = {"lstm": 2, "gru": 3}


@dataclass(frozen=True)
class RNNTrainConfig(LayerConfig):
    """One call of an ONNX LSTM / GRU layer's training step: ``call`` "forward" (the training-mode
    forward), "backward_data" (dX, dHx, dCx) or "backward_weight" (dW, dR, dB); the other fields
    are the forward layer's (:class:`benanza.kinds.RNNConfig`: cell, seq_len, input_size,
    hidden_size, batch, num_layers, direction, bias, layout, linear_before_reset).

    Shapes (elements): x (seq_len, batch, input_size) ("seq_major") or (batch, seq_len, input_size)
    ("batch_major"); y the RNN kind's output. Inputs and output per call: forward x -> y;
    backward_data dy, y -> dx (x's shape; dHx and dCx beside it); backward_weight x, y -> the
    gradient of every weight and bias, (:attr:`weight_count`,).

    FLOPs (multiply-add = 2; the elementwise cell work is not counted, as the RNN kind does not):
    each of the three calls is 2 * seq_len * batch * gates * hidden * (input + hidden) per direction
    and layer. The forward computes the gates W x_t + R h_{t-1} (cuDNN developer guide, "Recurrent
    neural networks"); the data gradient multiplies the gates' gradients by the transposed W (dX)
    and R (dh_{t-1}); the weight gradient multiplies them by x_t (dW) and h_{t-1} (dR): each GEMM of
    the forward has a transposed GEMM of the same M, N and K in each gradient.
    """

    kind: ClassVar[str] = "RNNTrain"
    tensor_cores: ClassVar[bool] = True
    call: str
    cell: str
    seq_len: int
    input_size: int
    hidden_size: int
    batch: int = 1
    num_layers: int = 1
    direction: str = "forward"
    bias: bool = True
    layout: str = "seq_major"
    linear_before_reset: bool = False

    def __post_init__(self):
        if self.call not in RNN_TRAIN_CALLS:
            raise ValueError(f"RNNTrain call {self.call!r} (one of {', '.join(RNN_TRAIN_CALLS)})")
        if self.cell not in RNN_GATES or self.direction not in RNN_DIRECTIONS:
            raise ValueError(f"RNNTrain cell {self.cell!r} / direction {self.direction!r}")

    @classmethod
    def of(cls, fwd: RNNConfig, call: str) -> "RNNTrainConfig":
        """The ``call`` of the forward layer ``fwd`` (ValueError for an unknown call)."""
        return cls(call=call, **{f.name: getattr(fwd, f.name) for f in fields(fwd)})

    @property
    def forward(self) -> RNNConfig:
        """The inference layer's config (the same parameters)."""
        return RNNConfig(**{f.name: getattr(self, f.name) for f in fields(RNNConfig)})

    @property
    def computes_weight_gradients(self) -> bool:
        """True for the data-gradient call: the weight gradient cannot be computed without it
        (cudnnRNNBackwardWeights_v8 reads what cudnnRNNBackwardData_v8 leaves in the reserve space,
        and PyTorch's _cudnn_rnn_backward runs the data gradient "unconditionally ... because it
        mutates reserve", aten/src/ATen/native/cudnn/RNN.cpp), so a training plan keeps it for a
        layer whose input needs no gradient (:func:`benanza.processing.training.training_plan`)."""
        return self.call == "backward_data"

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def gates(self) -> int:
        return RNN_GATES[self.cell]

    @property
    def weight_count(self) -> int:
        """Elements of every weight and bias: per layer and direction gates * hidden * (input + hidden)
        matrices (ONNX's W and R) and, with ``bias``, 2 * gates * hidden (ONNX's B: the W and R biases,
        cuDNN's CUDNN_RNN_DOUBLE_BIAS). cuDNN's weight space may pad them (cudnnGetRNNWeightSpaceSize)."""
        per = self.gates * self.hidden_size * (self.input_size + self.hidden_size)
        per += 2 * self.gates * self.hidden_size if self.bias else 0
        return self.num_layers * self.num_directions * per

    def input_shapes(self):
        x = self.forward.input_shapes()[0]
        y = self.forward.output_shape()
        return {"forward": [x], "backward_data": [y, y], "backward_weight": [x, y]}[self.call]

    def output_shape(self):
        return {"forward": self.forward.output_shape(), "backward_data": self.forward.input_shapes()[0],
                "backward_weight": (self.weight_count,)}[self.call]

    def flops(self):
        return self.forward.flops()

    def describe(self):
        what = {"forward": "fwd-train", "backward_data": "bwd-data", "backward_weight": "bwd-weights"}[self.call]
        return f"RNNTrain({what} " + self.forward.describe()[len("RNN("):]


def rnn_backward(cfg: RNNConfig) -> tuple:
    """``Kind.backward`` of the RNN kind: ``(("forward", RNNTrainConfig call "forward"),
    ("backward_data", call "backward_data"), ("backward_weight", call "backward_weight"))``. The
    ``forward`` call is the training-mode forward (cudnnRNNForward in CUDNN_FWD_MODE_TRAINING,
    writing the reserve space), which replaces the inference call in a training step; the data
    gradient gives dX, dHx and dCx (cudnnRNNBackwardData_v8), the weight gradient dW, dR and dB
    (cudnnRNNBackwardWeights_v8), as PyTorch's ``_cudnn_rnn_backward`` computes them
    (aten/src/ATen/native/cudnn/RNN.cpp: ``_cudnn_rnn_backward_input`` then
    ``_cudnn_rnn_backward_weight``)."""
    return tuple((call, RNNTrainConfig.of(cfg, call)) for call in RNN_TRAIN_CALLS)


@dataclass(frozen=True)
class RnnTrainCase(Case):
    """One row of ``templates/rnn_train.cpp.j2``'s case table: the fields of its C++ ``RnnTrainCase`` in
    order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    call: CppValue
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


def _case(cfg: RNNTrainConfig, job: Job) -> RnnTrainCase:
    return RnnTrainCase(job=job_init(job), call=RNN_TRAIN_CALLS[cfg.call],
                        cell={"lstm": "CUDNN_LSTM", "gru": "CUDNN_GRU"}[cfg.cell], seq_len=cfg.seq_len,
                        batch=cfg.batch, input_size=cfg.input_size, hidden_size=cfg.hidden_size,
                        num_layers=cfg.num_layers, bidirectional=cpp_num(cfg.direction == "bidirectional"),
                        bias=cpp_num(cfg.bias), batch_major=cpp_num(cfg.layout == "batch_major"),
                        note=cpp_string(rnn_note(cfg.forward)))


def _torch(c: Ctx) -> Candidate:
    """On a CUDA device PyTorch's cuDNN ops, on the weights of one ``torch.nn.LSTM`` / ``GRU`` (its
    flat weight buffer, ``flatten_parameters``): ``aten::_cudnn_rnn(input, weights, 4 or 2, buf, hx,
    cx, mode, hidden, 0, layers, batch_first, 0.0, train=True, bidirectional, [], None)`` for the
    training forward; ``aten::_cudnn_rnn_backward(input, weights, stride0, buf, hx, cx, output,
    grad_output, grad_hy, grad_cy, mode, hidden, 0, layers, batch_first, 0.0, True, bidirectional,
    [], None, reserve, output_mask)`` for the gradients (torch 2.x native_functions.yaml), on the
    output and reserve of one training forward in the set-up; output_mask [True, True, True, False]
    for the data gradient, [False, False, False, True] for the weight gradient, which PyTorch
    computes after the data gradient in the same call (RNN.cpp: "unconditionally compute this
    gradient, because it mutates reserve"), so the framework's weight-gradient time includes its
    data gradient, and its note says so. Elsewhere (the CPU) the module's own forward in training
    mode (``aten::lstm`` / ``aten::gru``) for the forward; for a gradient NotSupported (PyTorch has
    no one call for it there)."""
    cfg, torch = c.cfg, c.torch
    fwd = cfg.forward
    batch_first = cfg.layout == "batch_major"
    bidir = cfg.direction == "bidirectional"
    notes = [n for n in (("reverse direction timed forward (the same work)" if cfg.direction == "reverse" else ""),
                         ("GRU linear_before_reset=0 timed as PyTorch's GRU (linear_before_reset=1, the same work)"
                          if cfg.cell == "gru" and not cfg.linear_before_reset else "")) if n]
    out_n = numel(cfg.output_shape())
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cfg.cell]
    if getattr(c.device, "type", None) == "cuda":
        m = cls(cfg.input_size, cfg.hidden_size, num_layers=cfg.num_layers, bias=cfg.bias,
                batch_first=batch_first, bidirectional=bidir).to(device=c.device, dtype=c.dtype)
        m.flatten_parameters()
        ws = [w for w in m._flat_weights]
        stride0 = 4 if cfg.bias else 2
        x = c.randn(fwd.input_shapes()[0])
        states = (cfg.num_layers * cfg.num_directions, cfg.batch, cfg.hidden_size)
        hx = c.randn(states)
        cx = c.randn(states) if cfg.cell == "lstm" else None
        aten = torch.ops.aten
        mode = _TORCH_MODE[cfg.cell]

        def forward(buf):
            return aten._cudnn_rnn(x, ws, stride0, buf, hx, cx, mode, cfg.hidden_size, 0, cfg.num_layers,
                                   batch_first, 0.0, True, bidir, [], None)

        first = forward(None)  # (output, hy, cy, reserve, weight_buf)
        buf = first[4]
        if cfg.call == "forward":
            return Candidate("torch:aten::_cudnn_rnn", "cudnn, train", lambda: forward(buf)[0], out_n,
                             "; ".join(notes))
        y, reserve = first[0], first[3]
        dy, dhy = c.randn(tuple(y.shape)), c.randn(states)
        dcy = c.randn(states) if cfg.cell == "lstm" else None
        data = cfg.call == "backward_data"
        mask = [True, True, True, False] if data else [False, False, False, True]

        def backward():
            r = aten._cudnn_rnn_backward(x, ws, stride0, buf, hx, cx, y, dy, dhy, dcy, mode, cfg.hidden_size, 0,
                                         cfg.num_layers, batch_first, 0.0, True, bidir, [], None, reserve, mask)
            return r[0] if data else torch.cat([g.reshape(-1) for g in r[3]])

        if not data:
            notes.append("PyTorch's _cudnn_rnn_backward computes the data gradient before the weight "
                         "gradient in the same call (it mutates the reserve): its time includes it, and "
                         "the concatenation of the weight gradients into one output")
        return Candidate("torch:aten::_cudnn_rnn_backward", "cudnn, " + ("dx, dhx, dcx" if data else "dw"),
                         backward, out_n, "; ".join(notes))
    # not a CUDA device: the module's training-mode forward; no one call computes the gradients
    if cfg.call != "forward":
        raise NotSupported(f"{cfg.call} of an RNN: PyTorch's one call for it is aten::_cudnn_rnn_backward, on a "
                           "CUDA device only (elsewhere autograd differentiates the cell's ops one by one)")
    m = cls(cfg.input_size, cfg.hidden_size, num_layers=cfg.num_layers, bias=cfg.bias, batch_first=batch_first,
            bidirectional=bidir).to(device=c.device, dtype=c.dtype).train()
    x = c.randn(fwd.input_shapes()[0])
    return Candidate(f"torch:aten::{cfg.cell}", "train", lambda: m(x)[0], out_n, "; ".join(notes))


def _min_bytes(cfg: RNNTrainConfig, ib: int, ob: int) -> int:
    """The compulsory traffic of each call (bytes; Williams et al., "Roofline", CACM 2009), from the
    cuDNN calls' arguments: forward: x, the weights and biases read once, y written once (the
    inference RNN's bytes; the reserve space it also writes has a size of cuDNN's choosing, not
    counted); backward_data: dy and the weights read, dx written; backward_weight: x and y (the
    hidden states the recurrent weights' gradient multiplies) read, and the weight gradient read and
    written once (CUDNN_WGRAD_MODE_ADD accumulates into it)."""
    x, y, w = numel(cfg.forward.input_shapes()[0]), numel(cfg.forward.output_shape()), cfg.weight_count
    if cfg.call == "forward":
        return ib * (x + w) + ob * y
    if cfg.call == "backward_data":
        return ib * (y + w) + ob * x
    return ib * (x + y + w) + ob * w


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the training forward of
#: the RNN kind's example
KIND = Kind(
    example=RNNTrainConfig(call="forward", cell="lstm", seq_len=35, input_size=1024, hidden_size=1024,
                           batch=1, num_layers=1, direction="forward", bias=True, layout="seq_major",
                           linear_before_reset=False),
    name="RNNTrain", config=RNNTrainConfig, template="rnn_train.cpp.j2", case=_case, min_bytes=_min_bytes,
    torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"LSTM": ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward"),
          "GRU": ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward")},
    nhwc=False, image=False, backward_of={"RNN": rnn_backward})
