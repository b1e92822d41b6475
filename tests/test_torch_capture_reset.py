"""A failed CUDA-graph capture of a framework candidate leaves PyTorch's default CUDA generator marked
as capturing, and every later random op of the worker failed ("Offset increment outside graph capture
encountered unexpectedly": the framework candidates of six training kinds on an H100, 2026-11-26g).
benanza.profiles.torch_candidates._capture resets it. Checked on a stand-in of torch (no GPU, no torch
needed): which calls are made, and that an older torch without the API is no error."""
import sys
import types

import pytest

from benanza.profiles import torch_candidates as T


class _Gen:
    def __init__(self, api=True):
        self.states = []
        if api:
            self.clone_state = lambda: "fresh state"
            self.graphsafe_set_state = self.states.append


def _fake_torch(gen, capture_fails=True):
    calls = []

    class Graph:
        def replay(self):
            calls.append("replay")

    class GraphCtx:
        def __init__(self, g):
            pass

        def __enter__(self):
            calls.append("capture")

        def __exit__(self, *exc):
            return False

    class Stream:
        def wait_stream(self, other):
            pass

    cuda = types.SimpleNamespace(
        Stream=Stream, CUDAGraph=Graph, graph=GraphCtx,
        synchronize=lambda: calls.append("sync"), default_generators=[gen], current_device=lambda: 0)

    class StreamCtx:
        def __init__(self, s):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda.stream = StreamCtx
    return types.SimpleNamespace(cuda=cuda), calls


@pytest.mark.parametrize("api", [True, False], ids=["torch>=2.4", "older"])
def test_a_failed_capture_resets_the_generator(monkeypatch, api):
    gen = _Gen(api)
    torch, calls = _fake_torch(gen)
    monkeypatch.setitem(sys.modules, "torch", torch)
    state = {"capturing": False}

    class Cand:  # captures badly: raises inside the capture, as a host sync does
        def fn(self):
            if calls and calls[-1] == "capture" or state["capturing"]:
                state["capturing"] = True
                raise RuntimeError("operation not permitted when stream is capturing")

    assert T._capture(Cand(), 3, torch.cuda.Stream()) is None and state["capturing"]
    assert gen.states == (["fresh state"] if api else [])


def test_a_good_capture_leaves_the_generator_alone(monkeypatch):
    gen = _Gen()
    torch, calls = _fake_torch(gen)
    monkeypatch.setitem(sys.modules, "torch", torch)

    class Cand:
        def fn(self):
            return 1

    assert T._capture(Cand(), 3, torch.cuda.Stream()) is not None and gen.states == [] and "replay" in calls
