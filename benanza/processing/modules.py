"""PyTorch modules as benanza's input: resolve a module spec, make example inputs, export to ONNX
with a dynamic batch, and read back which module each ONNX node came from.

A **module spec** (``benanza torch SPEC``) is one of

* a torchvision classification model name (``resnet50``, ``vit_b_16``; ``torchvision:NAME`` to be
  explicit): ``torchvision.models.get_model(NAME, weights=None)``, input ``[B, 3, 224, 224]``
  (``[B, 3, 299, 299]`` for inception_v3), random weights (the weights do not change the kernels);
* a transformers model (``transformers:bert``, ``bert-base-uncased``, ``bert_base``): the model
  type's default configuration (``AutoConfig.for_model``; a Hugging Face name is read with
  ``AutoConfig.from_pretrained`` from the local cache, never downloaded; ``transformers:PATH``, a
  ``config.json`` file or a folder holding one, the configuration of the model the user runs)
  built with random weights by ``AutoModel.from_config``; configuration overrides after a ``?``:
  ``transformers:llama?num_hidden_layers=8&hidden_size=1024&num_key_value_heads=2`` (values read
  as Python literals, else strings; a name the configuration lacks is refused). Two phases
  (docs/llm.md): ``prefill`` (default): inputs ``input_ids`` and ``attention_mask`` ``[B, seq]``
  int64 (``seq`` 128 by default, no padding); ``decode``: one new token per sequence against a
  KV cache of ``kv_len`` tokens, inputs ``input_ids`` ``[B, 1]``, ``attention_mask``
  ``[B, kv_len + 1]`` and per layer ``past_key_i``/``past_value_i``
  ``[B, kv_heads, kv_len, head_dim]``, or what the model's cache holds per token where that differs
  (MLA's compressed latent and rotary key; :func:`_cache_dims`) (the model's own cache is filled from them, so
  the step appends the new keys and values to the cache as generation does; the cache is the
  configuration's own, ``DynamicCache(config=...)``, so a sliding-window layer keeps its window).
  A model type transformers has a causal-LM class for (``AutoModelForCausalLM``: llama, qwen3,
  gpt2, mixtral, ...) is built with its LM head and returns ``logits``: the token as users time
  it, the vocabulary projection of the last position in prefill and of the new token in decode
  (``logits_to_keep=1``; every position's with ``train``); other types (bert) return
  ``last_hidden_state``;
* ``package.module:factory``: ``factory()`` returns the ``nn.Module``; the module
  ``package.module`` may define ``example_inputs(batch)`` returning a tuple of CPU tensors (else
  one ``[B, 3, 224, 224]`` float input is used, or ``input_shape`` when given).

The export (:func:`export_onnx`) uses torch.export (``torch.onnx.export(..., dynamo=True)``,
opset 20, a dynamic batch), whose nodes carry the module they came from
(``pkg.torch.onnx.name_scopes`` metadata), and falls back to the TorchScript exporter (opset 17,
``dynamic_axes``; node names ``/layer1/layer1.0/conv1/Conv`` carry the scope) when torch.export or
onnxscript fails. Weights go to an external file that is deleted: benanza reads graphs with
``load_external_data=False``. :func:`module_paths` reads the module path of each node back from
either form; :mod:`benanza.profiles.join` uses it to join kernels to layers through the
``record_function`` scopes that :mod:`benanza.profiles.capture` opens around every submodule.

torch is imported inside functions: importing this module needs only onnx.
"""
from __future__ import annotations

import ast
import importlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benanza.errors import ModelError, UsageError
from benanza.spec import DECODER_PHASES, MLA_FORMS
from benanza.processing import mla, translations

#: the record_function name prefix of a module scope in a native profile's trace (one colon: the
#: join treats ``ns::name`` events as framework ops)
SCOPE_PREFIX = "benanza.module:"
#: metadata key of the torch.export-based exporter holding a node's module names, outermost first
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
#: transformers spellings benanza accepts for a model type
TRANSFORMERS_ALIASES = {"bert_base": "bert", "bert-base-uncased": "bert", "bert-base-cased": "bert",
                        "gpt2": "gpt2", "roberta-base": "roberta", "distilbert-base-uncased": "distilbert"}
FLOAT_TYPES = (1, 10, 11, 16)  # onnx FLOAT, FLOAT16, DOUBLE, BFLOAT16


@dataclass
class ModuleSource:
    """A resolved module spec: ``name`` (file-name safe), ``kind`` (``torchvision``,
    ``transformers``, ``factory``, ``object``), ``build()`` -> the ``nn.Module`` in eval mode on the
    CPU, ``inputs(batch)`` -> tuple of CPU example tensors, ``input_names``, ``batch_dims`` (the
    batch dim of each input), ``spec``: the text it came from (None for a module object).
    ``device_inputs``: ``inputs`` also takes ``device=`` and draws the tensors there (a decode step's
    KV cache: gigabytes the CPU would draw, then copy). ``identity``: what the export depends on
    besides the library versions and benanza's code (:func:`export_key`; None: unknown, the export is
    never reused); ``cacheable``: the identity names library code only (torchvision and transformers
    models), so one user's exports may be shared between folders (:mod:`benanza.processing.cache`).
    ``attention``: an MLA decoder's decode step, the form its attention is exported in (a key of
    :data:`benanza.spec.MLA_FORMS`); None for any other step."""

    name: str
    kind: str
    build: Callable
    inputs: Callable
    input_names: tuple[str, ...]
    batch_dims: tuple[int, ...]
    spec: str | None = None
    output_names: tuple[str, ...] = ()
    notes: list = field(default_factory=list)
    device_inputs: bool = False
    identity: dict | None = None
    cacheable: bool = False
    attention: str | None = None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "module"


def _image_inputs(shape: tuple[int, ...]) -> Callable:
    def inputs(batch: int):
        import torch

        return (torch.randn(batch, *shape),)
    return inputs


def _torchvision(name: str, input_shape: tuple[int, ...] | None) -> ModuleSource:
    def build():
        import torchvision

        kw = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
        return torchvision.models.get_model(name, weights=None, **kw).eval()

    shape = input_shape or ((3, 299, 299) if name == "inception_v3" else (3, 224, 224))
    return ModuleSource(_safe(name), "torchvision", build, _image_inputs(shape), ("input",), (0,), output_names=("output",),
                        identity={"torchvision": name, "input_shape": list(shape)}, cacheable=True)




def split_overrides(text: str) -> tuple[str, dict]:
    """``"llama?num_hidden_layers=8&hidden_size=1024"`` -> ``("llama", {"num_hidden_layers": 8,
    "hidden_size": 1024})``: a transformers spec's configuration overrides, each value a Python
    literal (``ast.literal_eval``: ints, floats, booleans, None, lists) or else a string. Raises
    :class:`UsageError` for an item without ``=``, an empty or non-identifier name, or a name given twice."""
    base, sep, query = text.partition("?")
    out: dict = {}
    if not sep:
        return base, out
    for item in query.split("&"):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise UsageError(f"transformers spec {text!r}: give overrides as NAME=VALUE joined by &, "
                             f"e.g. transformers:llama?num_hidden_layers=8&hidden_size=1024 (not {item!r})")
        if key in out:
            raise UsageError(f"transformers spec {text!r}: {key} given twice")
        try:
            out[key] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            out[key] = raw.strip()
    return base, out


def _decoder_cache_shape(cfg) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a decoder configuration (``num_key_value_heads`` for GQA, else
    the attention heads; ``head_dim`` where the configuration has one, else hidden / heads)."""
    layers = int(cfg.num_hidden_layers)
    heads = int(cfg.num_attention_heads)
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    hd = getattr(cfg, "head_dim", None) or int(cfg.hidden_size) // heads
    return layers, kv, int(hd)


#: configuration fields a cache probe shrinks (they do not change what a layer's cache holds): the
#: vocabulary, the MLPs' widths and the experts
_PROBE_SMALL = {"vocab_size": 16, "intermediate_size": 16, "moe_intermediate_size": 16,
                "shared_expert_intermediate_size": 16, "num_experts": 2, "n_routed_experts": 2,
                "num_local_experts": 2, "num_experts_per_tok": 1, "n_shared_experts": 1, "n_group": 1,
                "topk_group": 1}


def _cache_dims(cfg) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """What one layer of the model's own cache holds per token: ((heads, dim) of its keys, (heads,
    dim) of its values), read off the cache a one-layer copy of the model (a tiny vocabulary, MLPs
    and experts; :data:`_PROBE_SMALL`) fills on one token. Per-head keys and values for most
    decoders; MLA (DeepSeek-V2/V3 in transformers 5) caches its compressed latent, (1,
    kv_lora_rank), and the rotary key, (1, qk_rope_head_dim). None where the probe fails (the
    configuration's arithmetic, :func:`_decoder_cache_shape`, is used)."""
    import copy

    import torch

    probe = copy.deepcopy(cfg)
    probe.num_hidden_layers = 1
    for k, v in _PROBE_SMALL.items():
        if isinstance(getattr(probe, k, None), int):
            setattr(probe, k, v)
    if isinstance(getattr(probe, "layer_types", None), list):
        probe.layer_types = probe.layer_types[:1]
    try:
        model = _lm_model(probe, causal_lm(probe)).eval()
        cache = _model_cache(probe)
        with torch.no_grad():
            model(input_ids=torch.zeros(1, 1, dtype=torch.int64), attention_mask=torch.ones(1, 1, dtype=torch.int64),
                  past_key_values=cache, use_cache=True)
        layer = cache.layers[0]
        k, v = tuple(layer.keys.shape), tuple(layer.values.shape)
    except Exception:  # noqa: BLE001 - a model the probe cannot run: the configuration's arithmetic
        return None
    if len(k) != 4 or len(v) != 4:
        return None
    return (int(k[1]), int(k[3])), (int(v[1]), int(v[3]))


class UnknownTransformersModel(UsageError):
    """A transformers name that is neither a model type nor in the local Hugging Face cache."""


def causal_lm(cfg) -> bool:
    """Whether transformers has a causal-LM class (``AutoModelForCausalLM``) for the configuration:
    the model a user generates tokens with, LM head included."""
    from transformers import AutoModelForCausalLM

    try:
        return type(cfg) in AutoModelForCausalLM._model_mapping
    except Exception:  # noqa: BLE001 - a mapping that cannot load a model type's module
        return False


def _lm_model(cfg, causal: bool):
    """The transformers model of ``cfg`` with random weights: with its LM head when ``causal``."""
    from transformers import AutoModel, AutoModelForCausalLM

    return (AutoModelForCausalLM if causal else AutoModel).from_config(cfg)


def _transformers_config(base: str):
    """The configuration a transformers spec names (module doc): a config.json file or folder, a
    model type's default, or a name in the local Hugging Face cache. Raises UsageError."""
    from transformers import AutoConfig

    if base.endswith(".json") or os.path.isdir(base):
        if not os.path.exists(base):
            raise UsageError(f"transformers config {base!r}: no such file")
        try:
            return AutoConfig.from_pretrained(base, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds for a bad file
            raise UsageError(f"transformers config {base!r}: cannot read it ({_first(e)})") from None
    mt = TRANSFORMERS_ALIASES.get(base, base)
    try:
        return AutoConfig.for_model(mt)
    except (ValueError, KeyError):
        pass
    try:
        return AutoConfig.from_pretrained(base, local_files_only=True)
    except Exception:
        raise UnknownTransformersModel(f"transformers model {base!r}: not a model type and not in the local "
                                       f"Hugging Face cache (benanza never downloads; try transformers:bert)"
                                       ) from None


#: fields a model reads where its configuration has them though the configuration class does not define
#: them (``getattr(config, "head_dim", hidden_size // heads)``: Qwen3-MoE's config.json sets 128, its class
#: has no such field) -> what a value must be
READ_IF_SET = {"head_dim": int}


def _with_overrides(name: str, base: str, cfg, overrides: dict):
    """``cfg`` with a spec's ``?key=value`` overrides, each checked against the configuration's own
    field (:func:`_check_override`); a model type's configuration is made again with them as its
    arguments. Raises UsageError."""
    for key, value in overrides.items():
        if not hasattr(cfg, key) and key not in READ_IF_SET:
            raise UsageError(f"transformers spec {name!r}: the {type(cfg).__name__} has no {key!r}")
        _check_override(name, cfg, key, value)
        setattr(cfg, key, value)
    if overrides and getattr(cfg, "model_type", None) == TRANSFORMERS_ALIASES.get(base, base):
        # a model type's configuration made again with the overrides as its arguments: the fields its
        # constructor derives from them follow (DeepSeek's head_dim from qk_rope_head_dim, a layer
        # pattern from num_hidden_layers), as in a config.json written for those values
        from transformers import AutoConfig

        try:
            cfg = AutoConfig.for_model(cfg.model_type, **overrides)
        except Exception as e:  # noqa: BLE001 - the configuration's own checks of the values
            raise UsageError(f"transformers spec {name!r}: {type(cfg).__name__} refuses the values: {_first(e)}"
                             ) from None
        for key, value in overrides.items():
            # a field the constructor does not take as an argument (a private one such as
            # _experts_implementation) is dropped by it: set again, never silently lost
            if getattr(cfg, key, None) != value:
                setattr(cfg, key, value)
    return cfg


def _transformers(name: str, seq: int, phase: str = "prefill", kv_len: int | None = None,
                  train: bool = False, mla_form: str = "transformers") -> ModuleSource:
    base, overrides = split_overrides(name)

    cfg = _with_overrides(name, base, _transformers_config(base), overrides)
    _check_positions(name, cfg, seq, phase, kv_len)
    vocab = int(getattr(cfg, "vocab_size", 30522))
    label = _safe(Path(base).parent.name if base.endswith(".json") else Path(base).name if os.path.isdir(base) else base)
    if overrides:
        label += "_" + _safe("_".join(f"{k}{v}" for k, v in overrides.items()))
    causal = causal_lm(cfg)
    if phase == "decode":
        return _decoder_decode(cfg, label, vocab, kv_len if kv_len is not None else seq, causal, mla_form)
    if phase != "prefill":
        raise UsageError(f"--phase {phase!r}: choose {' or '.join(DECODER_PHASES)}")
    keep = 0 if train else 1  # logits_to_keep: 0 = every position (a training step's loss)

    def build():
        import torch

        class Encoder(torch.nn.Module):
            """The transformers model called with keyword inputs, returning its logits (a causal LM:
            the last position's, or every position's in training) or its last hidden state."""

            def __init__(self):
                super().__init__()
                self.model = _lm_model(cfg, causal)

            def forward(self, input_ids, attention_mask):
                if causal:
                    return self.model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits
                return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        torch.manual_seed(0)
        return Encoder().eval()

    def inputs(batch: int):
        import torch

        g = torch.Generator().manual_seed(0)
        return (torch.randint(0, vocab, (batch, seq), generator=g), torch.ones(batch, seq, dtype=torch.int64))

    src = ModuleSource(label, "transformers", build, inputs, ("input_ids", "attention_mask"), (0, 0),
                       output_names=("logits" if causal else "last_hidden_state",), cacheable=True,
                       identity={"transformers": _config_identity(cfg), "phase": "prefill", "seq": seq,
                                 "head": ("lm_all" if train else "lm_last") if causal else "none"})
    if causal:
        src.notes.append(f"the step ends with the LM head ({vocab:,} tokens): "
                         + ("every position's logits (training)" if train else "the last position's logits, as "
                            "generation computes them (time to first token)"))
    return src


def _check_override(name: str, cfg, key: str, value) -> None:
    """A configuration override ``key=value`` of the type of the configuration's own value (an int
    for an int, a number for a float, a bool for a bool, a string for a string, a list for a list;
    anything where it is None; None where the configuration class declares the field optional, as
    DeepseekV3Config's ``q_lora_rank: int | None``, DeepSeek-V2-Lite's query without LoRA), not negative
    where that is not; raises :class:`UsageError` otherwise."""
    cur = getattr(cfg, key, None)
    if value is None and _optional_field(type(cfg), key):
        return
    if cur is None and key in READ_IF_SET:
        cur = READ_IF_SET[key]()  # 0 of the type: a non-negative value of that type
    kinds = ((bool, "a bool", (bool,)), (int, "an int", (int,)), (float, "a float", (int, float)),
             (str, "a str", (str,)), ((list, tuple), "a list", (list, tuple)))
    for have, words, ok in kinds:
        if isinstance(cur, have):
            good = isinstance(value, ok) and (have is bool or not isinstance(value, bool))
            if not good:
                raise UsageError(f"transformers spec {name!r}: {key}={value}: {type(cfg).__name__}'s {key} is "
                                 f"{words} ({cur!r}), not {value!r}")
            if have in (int, float) and cur >= 0 and value < 0:
                raise UsageError(f"transformers spec {name!r}: {key}={value}: {type(cfg).__name__}'s {key} is "
                                 f"a non-negative {words.split()[-1]} ({cur!r}), not {value!r}")
            return


def _optional_field(cls, key: str) -> bool:
    """Whether ``cls`` (a configuration class) annotates ``key`` as possibly None (``int | None``,
    ``Optional[int]``), by the first class of its MRO that annotates it."""
    for k in cls.__mro__:
        ann = vars(k).get("__annotations__", {}).get(key)
        if ann is not None:
            text = ann if isinstance(ann, str) else repr(ann)
            return "None" in text or "Optional" in text
    return False


def _check_positions(name: str, cfg, seq: int, phase: str, kv_len: int | None) -> None:
    """The tokens a step reads (prefill: ``seq``; decode: the cache of ``kv_len`` and the new token)
    within the configuration's ``max_position_embeddings`` where it has one; raises
    :class:`UsageError` naming the flag and the override that raises the limit."""
    limit = getattr(cfg, "max_position_embeddings", None)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return
    join = "&" if "?" in name else "?"
    cls = type(cfg).__name__
    if phase == "decode":
        kv = kv_len if kv_len is not None else seq
        if kv + 1 > limit:
            flag = "--kv-len" if kv_len is not None else "--seq"
            raise UsageError(f"{flag} {kv}: {cls} holds {limit} positions (max_position_embeddings); a decode step "
                             f"reads the cache and 1 new token: give at most {limit - 1} or raise it: "
                             f"transformers:{name}{join}max_position_embeddings={kv + 1}")
    elif seq > limit:
        raise UsageError(f"--seq {seq}: {cls} holds {limit} positions (max_position_embeddings); give at most "
                         f"{limit} or raise it: transformers:{name}{join}max_position_embeddings={seq}")


def _config_identity(cfg) -> str:
    """A transformers configuration as the export sees it: its full JSON (every field, defaults
    included), so a default that changes between transformers versions changes the identity too."""
    try:
        return cfg.to_json_string(use_diff=False)
    except Exception:  # noqa: BLE001 - a configuration with a field JSON cannot hold
        return repr(sorted(cfg.to_dict().items(), key=lambda kv: kv[0]))


def _decoder_decode(cfg, label: str, vocab: int, kv_len: int, causal: bool = True,
                    mla_form: str = "transformers") -> ModuleSource:
    """The decode step of a transformers decoder (module doc): ``forward(input_ids, attention_mask,
    past_key_0, past_value_0, ...)`` fills a ``DynamicCache`` from the past tensors and runs the
    model on the new token; ``causal``: with the LM head, returning the new token's logits (else
    the last hidden state). ``mla_form`` ``absorbed`` (an MLA model only): the weight-absorbed
    step (:mod:`benanza.processing.mla`), one input ``past_latent_i`` [B, 1, kv_len, kv_lora_rank +
    qk_rope_head_dim] per layer. Raises :class:`UsageError` for a configuration without decoder
    fields, a ``kv_len`` below 1 or ``absorbed`` for a model without MLA."""
    if kv_len < 1:
        raise UsageError(f"--kv-len {kv_len}: the KV cache needs at least one token")
    try:
        layers, kv_heads, head_dim = _decoder_cache_shape(cfg)
    except (AttributeError, TypeError, ValueError, ZeroDivisionError):
        raise UsageError(f"--phase decode: {type(cfg).__name__} is no decoder configuration (no layers, heads "
                         f"and hidden size)") from None
    absorbed = mla_form == "absorbed"
    if absorbed and not mla.is_mla(cfg):
        raise UsageError(f"--mla absorbed: {type(cfg).__name__} has no multi-head latent attention (no "
                         f"kv_lora_rank; DeepSeek-V2/V3 have it)")
    probed = ((1, mla.latent_dim(cfg)), (0, 0)) if absorbed else _cache_dims(cfg)
    (k_heads, k_dim), (v_heads, v_dim) = probed or ((kv_heads, head_dim), (kv_heads, head_dim))

    def build():
        import torch

        class Decode(torch.nn.Module):
            """One generated token against the KV cache given as inputs; returns its logits (a causal
            LM) or the last hidden state."""

            def __init__(self):
                super().__init__()
                self.model = _lm_model(cfg, causal)
                if absorbed and not mla.absorb(self.model):
                    raise UsageError(f"--mla absorbed: {type(self.model).__name__} has no attention of "
                                     f"{' or '.join(mla.MLA_CLASSES)} to absorb")

            def forward(self, input_ids, attention_mask, *past):
                cache = _model_cache(cfg)
                for i in range(layers):
                    # the absorbed form's one latent per layer is its keys (the values' copy is never read)
                    cache.update(*((past[i], past[i]) if absorbed else (past[2 * i], past[2 * i + 1])), i)
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                                 use_cache=True, **({"logits_to_keep": 1} if causal else {}))
                return out.logits if causal else out.last_hidden_state

        torch.manual_seed(0)
        return Decode().eval()

    def inputs(batch: int, device=None):
        import torch

        # drawn where they are used (device=: the profiling child's GPU): a 4096-token cache at batch
        # 32 is 2.4 G normal numbers, 13 of the 21 s GPT-2's profiling child spent building its module
        # and inputs when the CPU drew them (an H200)
        g = torch.Generator(device=device or "cpu").manual_seed(0)
        past = [torch.randn(batch, *((k_heads, kv_len, k_dim) if i % 2 == 0 or absorbed else (v_heads, kv_len, v_dim)),
                            generator=g, device=device) for i in range(layers if absorbed else 2 * layers)]
        return (torch.randint(0, vocab, (batch, 1), generator=g, device=device),
                torch.ones(batch, kv_len + 1, dtype=torch.int64, device=device), *past)

    names = ("input_ids", "attention_mask") + (tuple(f"past_latent_{i}" for i in range(layers)) if absorbed else
                                               tuple(f"past_{t}_{i}" for i in range(layers) for t in ("key", "value")))
    src = ModuleSource(f"{label}_decode_kv{kv_len}" + ("_mla_absorbed" if absorbed else ""), "transformers", build,
                       inputs, names, (0,) * len(names), output_names=("logits" if causal else "last_hidden_state",),
                       device_inputs=True, cacheable=True,
                       identity={"transformers": _config_identity(cfg), "phase": "decode", "kv_len": kv_len,
                                 "head": "lm_last" if causal else "none", **({"mla": mla_form} if absorbed else {})})
    if mla.is_mla(cfg):
        src.attention = mla_form
        src.notes.append(f"MLA decode in {MLA_FORMS[mla_form]}")
    what = (f"the MLA latent, 1 x {k_dim} (kv_lora_rank + qk_rope_head_dim), per token" if absorbed else
            f"{k_heads} KV heads of {k_dim}" if (k_heads, k_dim) == (v_heads, v_dim)
            else f"keys {k_heads} x {k_dim} and values {v_heads} x {v_dim} per token, as the model caches them")
    src.notes.append(f"decode: 1 new token per sequence against a KV cache of {kv_len} tokens ({layers} layers, "
                     f"{what})"
                     + (f", ending with the LM head's logits of the new token ({vocab:,} tokens)" if causal else ""))
    return src


def _model_cache(cfg):
    """The model's own KV cache for ``cfg``: ``DynamicCache(config=cfg)`` (transformers 4.56 and
    later: a sliding-window layer keeps only its window, as generation does), else a plain
    ``DynamicCache()``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=cfg)
    except TypeError:  # an older transformers: one kind of layer
        return DynamicCache()


def _factory(spec: str, input_shape: tuple[int, ...] | None) -> ModuleSource:
    mod_name, _, fn = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise UsageError(f"module spec {spec!r}: cannot import {mod_name!r}: {type(e).__name__}: {e}") from None
    factory = getattr(mod, fn, None)
    if not callable(factory):
        raise UsageError(f"module spec {spec!r}: {mod_name!r} has no callable {fn!r}")
    _check_no_arguments(spec, f"{mod_name}.{fn}", factory)

    def build():
        m = user_call(spec, f"{fn}()", factory)
        import torch

        if not isinstance(m, torch.nn.Module):
            raise UsageError(f"module spec {spec!r}: {fn}() returned {type(m).__name__}, not a torch.nn.Module")
        return m.eval()

    ex = getattr(mod, "example_inputs", None)
    if callable(ex):
        inputs = lambda batch: tuple(user_call(spec, "example_inputs(batch)", ex, batch))  # noqa: E731
    else:
        inputs = _image_inputs(input_shape or (3, 224, 224))
    return ModuleSource(_safe(fn if fn not in ("model", "build", "create") else mod_name.rsplit(".", 1)[-1]),
                        "factory", build, inputs, ("input",) if not callable(ex) else (), (0,) if not callable(ex) else (),
                        spec=spec, identity={"factory": spec, "input_shape": list(input_shape or ()),
                                             "source": _source_digest(mod)})


def _check_no_arguments(spec: str, name: str, factory) -> None:
    """A model factory is called without arguments: refuse one whose signature requires some
    (``os:system``). Callables without a readable signature pass (their call says)."""
    import inspect

    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    try:
        sig.bind()
    except TypeError:
        need = [p.name for p in sig.parameters.values() if p.default is p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        raise UsageError(f"module spec {spec!r}: {name} is not a torch.nn.Module factory (it takes arguments: "
                         f"{', '.join(need)}; a factory takes none)") from None


def user_call(spec: str, what: str, fn: Callable, *args):
    """``fn(*args)``: code the module spec names (a user's factory, a library's model built from the
    user's configuration). Raises :class:`UsageError` naming ``spec``, ``what`` was called and the
    exception it raised (its first line), or the exit status where it called ``sys.exit``: anything
    but Ctrl-C (``KeyboardInterrupt`` passes) and benanza's own errors."""
    from benanza.errors import BenanzaError

    try:
        return fn(*args)
    except (KeyboardInterrupt, BenanzaError):
        raise
    except SystemExit as e:
        raise UsageError(f"module spec {spec!r}: the factory exited (SystemExit {e.code})") from None
    except BaseException as e:  # noqa: BLE001 - the user's code: any exception is their input's error
        raise UsageError(f"module spec {spec!r}: {what} raised {type(e).__name__}: {_first(e)}") from None


def _source_digest(mod) -> str | None:
    """SHA-256 of the file that defines ``mod`` (a user's factory module: an edit to it changes what
    the export holds); None when the module has no readable source file."""
    import hashlib
    import inspect

    try:
        return hashlib.sha256(Path(inspect.getsourcefile(mod) or "").read_bytes()).hexdigest()
    except (OSError, TypeError):
        return None


#: the extra that installs what `benanza torch` runs (pyproject.toml)
TORCH_EXTRA = 'pip install "benanza[torch]"'


def require(*packages: str, what: str) -> None:
    """Raise :class:`UsageError` naming the first of ``packages`` (import names: ``torch``,
    ``torchvision``, ``transformers``) that is not installed, and the extra that installs them
    (:data:`TORCH_EXTRA`); ``what`` names what needs them. Looks the packages up without importing them."""
    import importlib.util

    for name in packages:
        if importlib.util.find_spec(name) is None:
            raise UsageError(f"{what} needs {name}, which is not installed: {TORCH_EXTRA} "
                             f"(torch, torchvision, transformers), or pip install {name}")


def _is_torchvision_model(name: str) -> bool:
    import torchvision

    return name in torchvision.models.list_models(module=torchvision.models)


def resolve(spec: str, seq: int = 128, input_shape: tuple[int, ...] | None = None, phase: str = "prefill",
            kv_len: int | None = None, train: bool = False, mla_form: str = "transformers") -> ModuleSource:
    """The :class:`ModuleSource` of a module spec (module doc); ``phase`` and ``kv_len`` (tokens in
    the KV cache, default ``seq``) choose a transformers decoder's prefill or decode step;
    ``train``: a training step (a causal LM's logits at every position, not the last); ``mla_form``
    (:data:`benanza.spec.MLA_FORMS`): an MLA decoder's decode step in transformers' form or the
    weight-absorbed one (:mod:`benanza.processing.mla`; ``absorbed`` only with ``phase`` decode of a
    transformers model with MLA). Raises
    :class:`UsageError` for a spec that names nothing benanza can build (the message lists the
    forms), a torchvision name it has no model of, a factory that takes arguments, a transformers
    override of the wrong type or a ``seq``/``kv_len`` beyond the configuration's
    ``max_position_embeddings``, or ``--phase decode`` of a module that is no transformers model. The
    source's ``build()`` raises :class:`UsageError` for whatever the factory or the library raises or
    a factory's result that is not an ``nn.Module`` (:func:`user_call`)."""
    s = spec.strip()
    if not s:
        raise UsageError("empty module spec")
    if phase not in DECODER_PHASES:
        raise UsageError(f"--phase {phase!r}: choose {' or '.join(DECODER_PHASES)}")
    if phase != "prefill" and not s.startswith("transformers:"):
        raise UsageError(f"--phase {phase}: only a transformers decoder has one (transformers:TYPE), not {spec!r}")
    if mla_form != "transformers" and (phase != "decode" or not s.startswith("transformers:")):
        raise UsageError(f"--mla {mla_form}: only with --phase decode of a transformers model with MLA "
                         f"(transformers:deepseek_v3)")
    what = f"module spec {spec!r}"
    if s.startswith("torchvision:"):
        require("torch", "torchvision", what=what)
        src = _torchvision(_torchvision_name(spec, s.split(":", 1)[1]), input_shape)
    elif s.startswith("transformers:"):
        require("torch", "transformers", what=what)
        src = _transformers(s.split(":", 1)[1], seq, phase, kv_len, train, mla_form)
    elif ":" in s:
        require("torch", what=what)
        src = _factory(s, input_shape)
    else:
        # a bare name: a transformers alias, else a torchvision model's, else a transformers hub name
        require("torch", "transformers" if s in TRANSFORMERS_ALIASES else "torchvision", what=what)
        if s not in TRANSFORMERS_ALIASES and _is_torchvision_model(s):
            src = _torchvision(s, input_shape)
        elif s in TRANSFORMERS_ALIASES or re.fullmatch(r"[A-Za-z0-9_-]+(/[A-Za-z0-9_.-]+)?", s):
            try:
                src = _transformers(s, seq, train=train)
            except (UnknownTransformersModel, ImportError):
                raise UsageError(f"unknown module spec {spec!r}: give a torchvision model name (resnet50), "
                                 f"transformers:TYPE (transformers:bert) or package.module:factory") from None
        else:
            raise UsageError(f"unknown module spec {spec!r}: give a torchvision model name (resnet50), "
                             f"transformers:TYPE (transformers:bert) or package.module:factory")
    src.spec = spec
    if src.kind != "factory":  # a library's model from the user's name and configuration
        build = src.build
        src.build = lambda: user_call(spec, "building it", build)
    return src


def _torchvision_name(spec: str, name: str) -> str:
    """``name`` if torchvision has a classification model of that name; raises :class:`UsageError`
    naming the closest ones otherwise."""
    import difflib

    if _is_torchvision_model(name):
        return name
    import torchvision

    known = list(torchvision.models.list_models(module=torchvision.models))
    close = difflib.get_close_matches(name, known, n=3)
    hint = (f"did you mean {', '.join(close)}?" if close
            else f"torchvision.models.list_models() names its {len(known)} models")
    raise UsageError(f"module spec {spec!r}: torchvision has no model {name!r} ({hint})")


def from_module(module, example_inputs: tuple, batch_dims: tuple[int, ...] | None = None,
                name: str | None = None) -> ModuleSource:
    """A :class:`ModuleSource` of a module object and example inputs at any batch (their batch dim
    (``batch_dims``, 0 by default) is resized with :func:`torch.Tensor.expand` + clone for another batch)."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"analyze_module needs a torch.nn.Module, got {type(module).__name__}")
    xs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not xs or not all(isinstance(x, torch.Tensor) for x in xs):
        raise UsageError("example_inputs must be a tensor or a tuple of tensors")
    dims = tuple(batch_dims) if batch_dims is not None else (0,) * len(xs)

    def inputs(batch: int):
        out = []
        for x, d in zip(xs, dims):
            x = x.detach().cpu()
            idx = [slice(None)] * x.dim()
            idx[d] = slice(0, 1)
            one = x[tuple(idx)]
            shape = list(x.shape)
            shape[d] = batch
            out.append(one.expand(*shape).clone())
        return tuple(out)

    import inspect

    cls = type(module)
    return ModuleSource(_safe(name or cls.__name__.lower()), "object", lambda: module.eval(), inputs,
                        tuple(f"input_{i}" for i in range(len(xs))), dims,
                        identity={"object": f"{cls.__module__}.{cls.__qualname__}", "modules": repr(module),
                                  "source": _source_digest(inspect.getmodule(cls)),
                                  "inputs": [[list(x.shape), str(x.dtype)] for x in xs], "batch_dims": list(dims)})


# ------------------------------------------------------------------------------------- export

@dataclass(frozen=True)
class Export:
    """One ONNX export: ``path``, ``exporter`` (``dynamo`` or ``torchscript``), ``opset``,
    ``seconds`` it took, ``size`` (bytes, weights stripped), ``notes``."""

    path: Path
    exporter: str
    opset: int
    seconds: float
    size: int
    notes: tuple[str, ...] = ()


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def export_key(src: ModuleSource, keep_batch_norms: bool = False, batch: int = 2) -> str | None:
    """The key of ``src``'s export (:func:`export_onnx` with ``keep_batch_norms``, traced at ``batch``):
    SHA-256 (32 hex digits) of the source's ``identity``, the versions of the packages that build and
    export it (torch, torchvision, transformers, onnx, onnxscript) and benanza's version and export
    code (this file). Two exports with one key are the same graph, so one may stand for the other.
    None when the source has no identity (it is then exported every time)."""
    import hashlib
    import json

    if src.identity is None:
        return None
    doc = {"identity": src.identity, "kind": src.kind, "name": src.name, "keep_batch_norms": bool(keep_batch_norms),
           "trace_batch": max(batch, 2),
           "versions": {d: _dist_version(d) for d in ("torch", "torchvision", "transformers", "onnx", "onnxscript")},
           "benanza": _export_code()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _export_code() -> str:
    """benanza's version and the SHA-256 of this file: the code that builds and exports a module."""
    import hashlib

    from benanza import __version__

    return __version__ + ":" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _has_onnxscript() -> bool:
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return False
    return True


def _first(e: BaseException) -> str:
    t = _ANSI.sub("", str(e)).strip()
    return t.splitlines()[0][:300] if t else type(e).__name__


#: terminal colour and control sequences (CSI), which torch.onnx writes into its messages
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
#: ops the exporters cannot translate, with what they are in the model (the reason to name them)
_KNOWN_UNEXPORTABLE = {
    "transformers.grouped_mm_fallback": "the experts' grouped matmul, transformers' default form of a "
                                        "mixture-of-experts layer",
    "aten::histc": "the router's tokens-per-expert histogram of a mixture-of-experts model",
}


def export_failure(e: BaseException) -> str:
    """Why an exporter failed, in one line: the innermost cause of ``e``'s chain (``__cause__`` /
    ``__context__``; torch.onnx wraps the op it could not translate two levels down, under a
    generic "Failed to convert" with next steps), without terminal colour codes, the op named
    plainly and, for an op :data:`_KNOWN_UNEXPORTABLE` knows, what it is in the model."""
    chain, x = [], e
    while x is not None and len(chain) < 16:
        chain.append(x)
        x = x.__cause__ or x.__context__
    text = _first(chain[-1])
    m = re.search(r"No ONNX function found for <OpOverload\(op='([^']+)'", text)
    if m:
        text = f"no ONNX function for {m.group(1)}"
    op = m.group(1) if m else next((k for k in _KNOWN_UNEXPORTABLE if k in text), None)
    return text + (f" ({_KNOWN_UNEXPORTABLE[op]})" if op in _KNOWN_UNEXPORTABLE else "")


def export_onnx(src: ModuleSource, path: str | os.PathLike, batch: int = 2, keep_batch_norms: bool = False) -> Export:
    """Export ``src``'s module to ``path`` with a dynamic batch, traced at ``batch`` (at least 2,
    so that no exporter specializes the batch to 1). torch.export first (node metadata keeps the
    module scopes), the TorchScript exporter when it fails. Grad mode stays on during the export:
    under ``no_grad`` nn.MultiheadAttention takes its fused fast path, which no exporter knows.
    Raises :class:`ModelError` with each exporter's reason (:func:`export_failure`) when both fail.

    ``keep_batch_norms`` (a training step, ``--train``): the export keeps each BatchNormalization
    as its own node, as training runs it (with the batch's statistics), instead of folding it into
    the preceding convolution as both exporters do for inference: the TorchScript exporter first,
    with ``do_constant_folding=False`` (its eval peephole folds Conv + BatchNorm otherwise), then
    torch.export with ``optimize=False``. An export that still lost a batch norm of the
    module is refused and the next exporter tried. Dropout is absent from either export (the
    module is exported in eval mode): a training step's dropout kernels are not in the model."""
    import contextlib
    import io
    import logging

    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, inputs, notes = src.build(), src.inputs(max(batch, 2)), []
    if src.kind == "object":  # the user's module: exported as a CPU copy, never changed
        import copy

        model = copy.deepcopy(model).cpu()
    if _untrained_batch_norms(model):
        notes.append("batch norms at their initial statistics got random ones for the export (trained models have "
                     "them; with zero bias and mean the exporter drops the folded convolutions' bias)")
    names = list(src.input_names) or [f"input_{i}" for i in range(len(inputs))]
    dims = list(src.batch_dims) or [0] * len(inputs)
    errors = []
    exporters = ("dynamo", "torchscript") if _has_onnxscript() else ("torchscript",)
    if keep_batch_norms and "torchscript" in exporters:
        # torch.export's un-optimized graph decomposes what its optimizer would fuse (batch norms
        # into _native_batch_norm_legit, reductions with Expands: resnet18's export has 20 layers
        # benanza does not time; docs/training.md, "Batch norms"); the TorchScript exporter without constant folding
        # keeps each batch norm as one BatchNormalization node
        exporters = ("torchscript",) + tuple(e for e in exporters if e != "torchscript")
    if not _has_onnxscript():
        notes.append("onnxscript is not installed: TorchScript exporter (opset 17) instead of torch.export")
    for exporter in exporters:
        try:
            quiet = io.StringIO()
            logging.getLogger("torch.onnx").setLevel(logging.ERROR)
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                if exporter == "dynamo":
                    b = torch.export.Dim("batch")
                    torch.onnx.export(model, inputs, str(path), dynamo=True, external_data=True, opset_version=20,
                                      dynamic_shapes=dynamic_shapes(model, [{d: b} for d in dims]), input_names=names,
                                      output_names=list(src.output_names) or None,
                                      custom_translation_table=translations.table(),
                                      **({"optimize": False} if keep_batch_norms else {}))
                else:
                    outs = list(src.output_names) or ["output"]
                    axes = {n: {d: "batch"} for n, d in zip(names, dims)}
                    axes.update({n: {0: "batch"} for n in outs})
                    torch.onnx.export(model, inputs, str(path), dynamo=False, opset_version=17, input_names=names,
                                      output_names=outs, dynamic_axes=axes,
                                      **({"do_constant_folding": False} if keep_batch_norms else {}))
            if keep_batch_norms:
                _check_batch_norms_kept(model, path)
            size = strip_weights(path)
            return Export(path, exporter, 20 if exporter == "dynamo" else 17, time.perf_counter() - t0, size,
                          tuple(notes + [f"{e}" for e in errors]))
        except Exception as e:  # noqa: BLE001 - an exporter's failure is reported, the other tried
            errors.append(f"{exporter} export failed: {export_failure(e)}")
    raise ModelError(f"{src.spec or src.name}: cannot export to ONNX: " + "; ".join(errors))


def dynamic_shapes(model, per_input: list) -> tuple:
    """torch.export's ``dynamic_shapes`` for ``model`` called with one positional argument per entry of
    ``per_input``, structured as its ``forward`` takes them: the inputs a ``*args`` parameter collects
    are one tuple (a decode step's ``forward(input_ids, attention_mask, *past)``: torch.export refused
    the flat form, "inputs has 3 elements, but dynamic_shapes has 6", and every decode export fell
    back to the TorchScript exporter)."""
    import inspect

    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return tuple(per_input)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) and len(per_input) >= len(positional):
        return tuple(per_input[:len(positional)]) + (tuple(per_input[len(positional):]),)
    return tuple(per_input)


def _check_batch_norms_kept(model, path: Path) -> None:
    """Raise RuntimeError when the export at ``path`` has fewer BatchNormalization nodes than
    ``model`` has batch-norm modules (the exporter folded some into convolutions)."""
    import onnx
    import torch

    want = sum(1 for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))
    if not want:
        return
    got = sum(1 for n in onnx.load(str(path), load_external_data=False).graph.node
              if n.op_type == "BatchNormalization")
    if got < want:
        raise RuntimeError(f"the export kept {got} of the module's {want} batch norms (a training step runs each)")


def _untrained_batch_norms(model) -> int:
    """Give batch norms still at their initial statistics (mean 0, variance 1, bias 0) random ones,
    as a trained model has (torch.export's optimizer folds each into the preceding convolution and
    drops an all-zero bias, which would benchmark a convolution the real model does not run).
    Returns how many were changed."""
    import torch

    n = 0
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats \
                and m.running_mean is not None and not m.running_mean.any() and bool((m.running_var == 1).all()):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            n += 1
    return n


def strip_weights(path: Path, threshold: int = 1024) -> int:
    """Leave ``path`` with its graph and small constants only: floating-point initializers of
    ``threshold`` bytes or more (the weights) become external data in ``path``.data, which is
    deleted with every external file the exporter wrote; integer and bool tensors stay. Node
    metadata other than the module scopes (:data:`NAME_SCOPES_KEY`; stack traces, FX nodes) and
    value_info go. Returns the file's size (bytes)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_tensor, set_external_data

    m = onnx.load(str(path), load_external_data=False)
    location = path.name + ".data"
    written = {kv.value for t in m.graph.initializer for kv in t.external_data if kv.key == "location"}
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL and t.data_type not in FLOAT_TYPES:
            load_external_data_for_tensor(t, str(path.parent))
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
        elif t.data_location != onnx.TensorProto.EXTERNAL and t.HasField("raw_data") \
                and len(t.raw_data) >= threshold and t.data_type in FLOAT_TYPES:
            set_external_data(t, location=location)
            t.ClearField("raw_data")
    for n in m.graph.node:
        keep = [(p.key, p.value) for p in n.metadata_props if p.key == NAME_SCOPES_KEY]
        n.ClearField("metadata_props")
        for k, v in keep:
            n.metadata_props.add(key=k, value=v)
        n.doc_string = ""
    del m.graph.value_info[:]
    onnx.save(m, str(path))
    for name in written | {location}:
        if (path.parent / name).exists():
            (path.parent / name).unlink()
    return path.stat().st_size


# ---------------------------------------------------------------------------- module paths

def _path_of_scopes(value: str) -> str | None:
    """The innermost module of a ``name_scopes`` metadata value (``['', 'layer1', 'layer1.0',
    'layer1.0.conv1', 'conv2d_3']`` -> ``layer1.0.conv1``): the entries are qualified module names
    but the last, which names the ATen op."""
    try:
        scopes = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(scopes, (list, tuple)) or len(scopes) < 2:
        return "" if scopes else None
    mods = [str(s) for s in scopes[:-1]]
    return mods[-1]


def _path_of_name(name: str) -> str | None:
    """The module of a TorchScript-exported node name (``/layer1/layer1.0/conv1/Conv`` ->
    ``layer1.0.conv1``): the scope components joined by the qualified-name rule (a component
    that starts with its parent's path is already qualified)."""
    if not name.startswith("/"):
        return None
    parts = name.strip("/").split("/")[:-1]
    path = ""
    for p in parts:
        if path and p.startswith(path + "."):
            path = p
        else:
            path = f"{path}.{p}" if path else p
    return path


def module_paths(model) -> dict[str, str]:
    """Node name -> the qualified name of the module that produced it (``""`` for the root
    module), for the nodes whose export recorded it (module doc). ``model``: an ONNX ModelProto or
    a path. Nodes inside functions are not included."""
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    out = {}
    for n in model.graph.node:
        p = None
        for prop in n.metadata_props:
            if prop.key == NAME_SCOPES_KEY:
                p = _path_of_scopes(prop.value)
        if p is None:
            p = _path_of_name(n.name)
        if p is not None:
            out[n.name] = p
    return out


# ------------------------------------------------------------------------- the router's choice

def is_experts_module(m) -> bool:
    """Whether ``m`` is a transformers 5 experts module: the ``@use_experts_implementation`` classes of
    ``transformers/models/*`` (``Qwen3MoeExperts``, ``Qwen2MoeExperts``, ``MixtralExperts``,
    ``DeepseekV3Experts``, ``GptOssExperts``: a class named ``*Experts`` with ``num_experts``), which
    their MoE block calls as ``experts(hidden_states [T, H], top_k_index [T, k], top_k_weights)``."""
    return type(m).__name__.endswith("Experts") and isinstance(getattr(m, "num_experts", None), int)


def expert_counts(module, inputs: tuple) -> list[dict]:
    """The router's choice in one forward of ``module`` on ``inputs``: a forward pre-hook on each
    experts module (:func:`is_experts_module`) reads its ``top_k_index`` (the second positional argument,
    or the ``top_k_index`` / ``router_indices`` keyword) and counts the (token, expert) pairs per expert
    (``torch.bincount``, ``minlength`` E). Returns, in call order, one ``{"module", "experts", "top_k",
    "tokens", "counts"}`` per call (``module``: the qualified name in ``module.named_modules()``, the
    ONNX export's scope of its ``GroupedMatMul`` nodes; ``counts``: E ints summing to tokens x top_k).
    Runs under ``torch.no_grad``; the hooks are removed after. An index outside ``[0, E)`` (an expert
    parallel sentinel) is not counted and the entry is dropped."""
    import torch

    found: list[dict] = []
    handles = []

    def hook(name, mod):
        def pre(_m, args, kwargs):
            idx = args[1] if len(args) > 1 else kwargs.get("top_k_index", kwargs.get("router_indices"))
            if not isinstance(idx, torch.Tensor) or idx.dim() < 1:
                return
            e = int(mod.num_experts)
            flat = idx.reshape(-1).long()
            if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= e):
                return
            k = int(idx.shape[-1])
            found.append({"module": name, "experts": e, "top_k": k, "tokens": int(flat.numel()) // max(k, 1),
                          "counts": [int(c) for c in torch.bincount(flat, minlength=e).tolist()]})
        return pre

    for name, mod in module.named_modules():
        if is_experts_module(mod):
            handles.append(mod.register_forward_pre_hook(hook(name, mod), with_kwargs=True))
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for h in handles:
            h.remove()
    return found
