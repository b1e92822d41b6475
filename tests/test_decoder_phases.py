"""`benanza torch` of a transformers decoder without a GPU or torch (issue 27): configuration
overrides, the prefill and decode phases, the KV cache's shape and the CLI's checks."""
import subprocess
import sys

import pytest

from benanza.errors import UsageError
from benanza.processing.modules import resolve


def test_transformers_overrides_and_phases_parse_before_anything_is_imported():
    """Issue 27: ``transformers:TYPE?NAME=VALUE&...`` overrides (Python literals, else strings) and
    ``--phase decode`` only for a transformers model; bad forms are one-line usage errors."""
    from benanza.processing.modules import _decoder_cache_shape, split_overrides

    assert split_overrides("llama") == ("llama", {})
    assert split_overrides("llama?num_hidden_layers=8&hidden_size=1024&rope_scaling=None&act=silu") == \
        ("llama", {"num_hidden_layers": 8, "hidden_size": 1024, "rope_scaling": None, "act": "silu"})
    assert split_overrides("/cfg/config.json?rms_norm_eps=1e-05")[1] == {"rms_norm_eps": 1e-05}
    for bad, what in (("llama?layers", "NAME=VALUE"), ("llama?=3", "NAME=VALUE"), ("llama?a=1&a=2", "twice"),
                      ("llama?a b=1", "NAME=VALUE")):
        with pytest.raises(UsageError, match=what):
            split_overrides(bad)
    with pytest.raises(UsageError, match="only a transformers decoder"):
        resolve("resnet50", phase="decode")
    with pytest.raises(UsageError, match="choose prefill or decode"):
        resolve("transformers:llama", phase="generate")

    class Llama:  # GQA with an explicit head_dim, as Llama 3 / Qwen2 configurations have
        num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, head_dim = 8, 32, 8, 4096, 128

    class Gpt2:  # no KV-head field: every head has its own K and V; head_dim = hidden / heads
        num_hidden_layers, num_attention_heads, hidden_size = 12, 12, 768

    assert _decoder_cache_shape(Llama) == (8, 8, 128)
    assert _decoder_cache_shape(Gpt2) == (12, 12, 64)


def test_cli_phase_options_are_checked_in_one_line():
    r = subprocess.run([sys.executable, "-m", "benanza", "torch", "resnet18", "--kv-len", "512", "--no-bench"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "benanza: --kv-len: only with --phase decode"
    r = subprocess.run([sys.executable, "-m", "benanza", "torch", "transformers:llama", "--phase", "decode", "--train"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no decode phase" in r.stderr and len(r.stderr.strip().splitlines()) == 1
