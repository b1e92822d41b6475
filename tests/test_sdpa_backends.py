"""PyTorch's SDPA backends as framework candidates of their own (issue 27, item 2): the SDPA kind's and
the SdpaBwd kind's candidate has one variant per ``torch.nn.attention.SDPBackend`` (flash,
memory-efficient, cuDNN, math), each run under ``sdpa_kernel`` and labelled with the ATen op the
backend runs; a backend that refuses the config is recorded not_supported with the reasons PyTorch
warned, never timed. Run against a stand-in of torch (tests/torch_recorder.py) whose SDPA refuses
chosen backends the way PyTorch does (warnings, then "No available kernel")."""
from __future__ import annotations

import contextlib
import warnings
from types import SimpleNamespace

import pytest
from torch_recorder import Recorder

from benanza import kinds as L
from benanza.kinds.framework import Ctx, NotSupported
from benanza.kinds.sdpa import SDPA_BACKENDS
from benanza.kinds.sdpa_backward import SdpaBwdConfig

BACKENDS = tuple(SDPA_BACKENDS)
FLASH_WHY = "Flash attention does not support the use of an attn_mask."


class _Passthrough:
    """``torch.inference_mode(...)`` / ``torch.enable_grad()``: a context manager and a decorator."""

    def __call__(self, fn):
        return fn

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def fake_torch(refuse=("FLASH_ATTENTION",), broken=()):
    """A Recorder torch whose ``nn.attention.sdpa_kernel`` sets the backend and whose
    ``F.scaled_dot_product_attention`` records (backend, attn_mask, is_causal, kwargs); for a backend
    in ``refuse`` it warns PyTorch's reason (with the C++ suffix) and raises "No available kernel",
    for one in ``broken`` another RuntimeError."""
    calls: list = []
    torch = Recorder(calls)
    state = {"backend": None}
    sdpa_calls: list = []

    @contextlib.contextmanager
    def sdpa_kernel(backend):
        before, state["backend"] = state["backend"], backend
        try:
            yield
        finally:
            state["backend"] = before

    def sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, **kw):
        b = state["backend"]
        sdpa_calls.append((b, attn_mask, is_causal, kw))
        if b in refuse:
            warnings.warn("Memory efficient kernel not used because:")
            warnings.warn(f"{FLASH_WHY} (Triggered internally at /pytorch/aten/src/ATen/native/transformers/"
                          "sdp_utils_cpp.h:261.)")
            raise RuntimeError("No available kernel. Aborting execution.")
        if b in broken:
            raise RuntimeError("cuDNN Frontend error: something else")
        return Recorder(calls)

    torch.nn = SimpleNamespace(functional=SimpleNamespace(scaled_dot_product_attention=sdpa),
                               attention=SimpleNamespace(sdpa_kernel=sdpa_kernel,
                                                         SDPBackend=SimpleNamespace(**{n: n for n in BACKENDS})))
    torch.enable_grad = lambda: _Passthrough()
    torch.inference_mode = lambda mode=True: _Passthrough()
    torch.__version__ = "stand-in"
    return torch, calls, sdpa_calls


@pytest.fixture(autouse=True)
def _bias_module(monkeypatch):
    """``from torch.nn.attention.bias import causal_lower_right`` (torch_mask) finds a stand-in."""
    import sys

    if "torch" in sys.modules and not isinstance(sys.modules["torch"], Recorder):
        pytest.skip("torch is installed: these tests run against its stand-in only")
    bias = SimpleNamespace(causal_lower_right=lambda s_q, s_kv: ("CausalBias", s_q, s_kv))
    for name, mod in (("torch", Recorder([])), ("torch.nn", SimpleNamespace()),
                      ("torch.nn.attention", SimpleNamespace()), ("torch.nn.attention.bias", bias)):
        monkeypatch.setitem(sys.modules, name, mod)


def _build(cfg, torch):
    return L.REGISTRY[cfg.kind].torch(Ctx(cfg, torch, Recorder([]), Recorder([]), False))


DECODE = L.SdpaConfig(b=2, h=4, h_kv=2, s_q=1, s_kv=16, d=16, d_v=16, scale=0.25, mask="causal_bottom_right")


def test_each_backend_is_a_candidate_of_its_own():
    torch, calls, sdpa_calls = fake_torch()
    cand = _build(L.SdpaConfig(b=1, h=4, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, mask="causal"), torch)
    assert (cand.call, cand.algorithm) == ("torch:aten::scaled_dot_product_attention", "default")
    assert [v.call for v in cand.variants] == [
        "torch:aten::_scaled_dot_product_flash_attention", "torch:aten::_scaled_dot_product_efficient_attention",
        "torch:aten::_scaled_dot_product_cudnn_attention", "torch:aten::_scaled_dot_product_attention_math"]
    assert [v.algorithm for v in cand.variants] == [f"sdpa_kernel(SDPBackend.{b})" for b in BACKENDS]
    assert [v.details["backend"] for v in cand.variants] == list(BACKENDS)
    assert all(v.out_numel == cand.out_numel == 4 * 8 * 16 for v in cand.variants)
    cand.fn()  # the default: no backend forced, is_causal
    assert sdpa_calls[-1][:3] == (None, None, True)
    for v in cand.variants[1:]:
        v.fn()
        assert sdpa_calls[-1][0] == v.details["backend"] and sdpa_calls[-1][1:3] == (None, True)


def test_a_refusing_backend_is_not_supported_with_pytorchs_reason():
    torch, calls, sdpa_calls = fake_torch(refuse=("FLASH_ATTENTION",), broken=("CUDNN_ATTENTION",))
    cand = _build(DECODE, torch)
    flash, eff, cudnn, math_ = cand.variants
    with pytest.raises(NotSupported) as e:
        flash.fn()
    msg = str(e.value)
    assert msg.startswith("PyTorch's SDPBackend.FLASH_ATTENTION refuses this config: ")
    assert FLASH_WHY in msg and "Memory efficient kernel not used because:" in msg and "Triggered" not in msg
    with pytest.raises(RuntimeError, match="cuDNN Frontend"):  # other errors are failures, not refusals
        cudnn.fn()
    # a forced backend gets the bottom-right causal mask as the boolean tensor CausalBias materializes
    eff.fn()
    eff.fn()  # probed once: the second call runs under the backend too
    assert [c[0] for c in sdpa_calls[-2:]] == ["EFFICIENT_ATTENTION"] * 2
    assert sdpa_calls[-1][2] is False and sdpa_calls[-1][3] == {"enable_gqa": True}
    assert ("ones", ((1, 16),)) in calls and ("tril", (15,)) in calls
    math_.fn()
    assert sdpa_calls[-1][0] == "MATH"


def test_a_pytorch_without_the_backend_says_so():
    torch, _, _ = fake_torch(refuse=())
    del torch.nn.attention.SDPBackend.CUDNN_ATTENTION
    cand = _build(DECODE, torch)
    with pytest.raises(NotSupported, match="no torch.nn.attention.SDPBackend.CUDNN_ATTENTION"):
        cand.variants[2].fn()


def test_the_backward_forces_the_backend_of_its_forward():
    torch, calls, sdpa_calls = fake_torch(refuse=("FLASH_ATTENTION",))
    cfg = SdpaBwdConfig(b=1, h=4, h_kv=2, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, mask="causal")
    cand = _build(cfg, torch)
    assert (cand.call, cand.algorithm) == ("torch:aten::scaled_dot_product_attention", "autograd backward")
    assert [v.call for v in cand.variants] == [f"torch:{op}_backward" for op in SDPA_BACKENDS.values()]
    assert all(v.algorithm == f"autograd backward, sdpa_kernel(SDPBackend.{b})"
               for v, b in zip(cand.variants, BACKENDS))
    assert [c[0] for c in sdpa_calls] == [None]  # only the default's set-up forward ran at build time
    with pytest.raises(NotSupported, match="FLASH_ATTENTION"):
        cand.variants[0].fn()
    n = len(sdpa_calls)
    for _ in range(2):
        cand.variants[1].fn()
    assert [c[0] for c in sdpa_calls[n:]] == ["EFFICIENT_ATTENTION"]  # the forward once, at the first call
    assert [p for p, _ in calls].count("autograd.grad") == 2


def test_the_worker_records_the_refusal_beside_the_other_backends(monkeypatch):
    """benanza.profiles.torch_candidates.run_job: the default and each backend its own records; the
    refusing one not_supported with the reason, the job still ok."""
    T = pytest.importorskip("benanza.profiles.torch_candidates")
    torch, _, sdpa_calls = fake_torch(refuse=("FLASH_ATTENTION", "CUDNN_ATTENTION"))
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)

    def measure(cand, policy, l2_bytes=0, best_ms=None, laps=None):
        cand.fn()
        return [{"cache": "warm", "status": "ok", "median_ms": 1.0}]
    monkeypatch.setattr(T, "measure", measure)
    job = {"job": "j", "kind": "SDPA", "params": DECODE.params(), "precision": "fp16"}
    recs = T.run_job(job, T.Policy(), 0, kernels=False)
    got = {(r["call"], r["status"]) for r in recs}
    assert got == {("torch:aten::scaled_dot_product_attention", "ok"),
                   ("torch:aten::_scaled_dot_product_flash_attention", "not_supported"),
                   ("torch:aten::_scaled_dot_product_efficient_attention", "ok"),
                   ("torch:aten::_scaled_dot_product_cudnn_attention", "not_supported"),
                   ("torch:aten::_scaled_dot_product_attention_math", "ok")}
    refused = [r for r in recs if r["status"] == "not_supported"]
    assert all(FLASH_WHY in r["message"] and "median_ms" not in r for r in refused)
    assert {r["layer_key"] for r in recs} == {DECODE.key}
    # the default passes PyTorch's CausalBias (its own flash / memory-efficient dispatch)
    assert sdpa_calls[0][:3] == (None, ("CausalBias", 1, 16), False)
