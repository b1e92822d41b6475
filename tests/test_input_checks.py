"""Bad input is refused in one line before any work (issue 53, items 5, 9 and 14): ``--dim`` against
the model's symbolic dimensions and ``--batch``, ``benanza torch``'s module specs, factories and
lengths, and ``--optimizer`` without ``--train``. Each case: one line ``benanza: ...``, exit 2, no
traceback, nothing left behind.

CI and the development machine have no torch: ``benanza torch``'s factories are run against a
stand-in ``torch`` module (``sys.modules``) with the check for the installed packages
(:func:`benanza.processing.modules.require`) set aside, as tests/test_export_cache.py does; what
needs the real torch (an export, a profile) is not run here."""
import sys
import types
from pathlib import Path

import pytest

from conftest import REPO, scenario_of
from test_cli import bz, one_line_error

DEC = REPO / "tests" / "data" / "decoders"
PREFILL = DEC / "gpt2_prefill_dynamo20.onnx"  # inputs [batch, seq]
DECODE = DEC / "gpt2_decode_torchscript.onnx"  # inputs [batch, 1], [batch, total], [batch, 4, past, 32]
REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"

# ------------------------------------------------------------------------------ 5: --dim and --batch


@pytest.mark.parametrize("cmd", [
    ["layers", "--batch", "32"],
    ["generate", "--batch", "32", "-o", "{tmp}/suite"],
    ["bench", "--batch", "32", "--db", "{tmp}/perf.db", "-o", "{tmp}/suite"],
    ["analyze", "--batch", "32", "--db", str(REF_DB)],
    ["roofline", "--batch", "32", "--db", str(REF_DB)],
    ["predict", "--batch", "32", "--db", str(REF_DB), "--to", "h100-sxm"],
    ["profile", "--batch", "32", "-o", "{tmp}/profile"],  # checked before torch is looked for
])
def test_dim_cannot_rebind_the_batch_dimension_in_any_command(cmd, tmp_path):
    """`--dim batch=5 --batch 32` bound the batch to 5 while the results said batch 32."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    p = bz(args[0], PREFILL, *args[1:], "--dim", "batch=5", "--dim", "seq=8")
    msg = one_line_error(p, 2)
    assert msg.startswith("benanza: --dim batch=5: batch is the batch dimension, which --batch sets (32); "
                          "give --batch 5"), msg
    assert sorted(x.name for x in tmp_path.iterdir()) == [], "a refused command leaves nothing"


@pytest.mark.parametrize("cmd", [["layers"], ["analyze", "--db", str(REF_DB)],
                                 ["predict", "--db", str(REF_DB), "--to", "h100-sxm"]])
def test_dim_naming_no_symbolic_dimension_of_the_model_is_refused(cmd):
    p = bz(cmd[0], PREFILL, *cmd[1:], "--dim", "seq=8", "--dim", "foo=3")
    assert one_line_error(p, 2) == ("benanza: --dim foo=3: gpt2_prefill_dynamo20.onnx has no dimension 'foo' "
                                    "(its symbolic dimensions: batch, seq)")


def test_dim_on_a_model_without_symbolic_dimensions_is_refused():
    p = bz("layers", REPO / "tests" / "data" / "vit_b_16_fixed1.onnx", "--dim", "N=5")
    assert one_line_error(p, 2) == ("benanza: --dim N=5: vit_b_16_fixed1.onnx has no dimension 'N' (its inputs have no "
                                    "symbolic dimension; --batch sets the batch)")


def test_dim_equal_to_the_batch_and_the_other_dims_are_bound():

    p = bz("layers", PREFILL, "--batch", "4", "--dim", "batch=4", "--dim", "seq=8", "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "layers")
    assert d["batch"] == 4 and d["layer_list"][0]["input_shapes"][0] == [4, 8]  # [batch, seq]
    assert d == scenario_of(bz("layers", PREFILL, "--batch", "4", "--dim", "seq=8", "--json").stdout)
    # a decode step: every named dimension (the derived `total` too) may be bound
    p = bz("layers", DECODE, "--dim", "past=16", "--dim", "total=17", "--json")
    assert p.returncode == 0, p.stderr


def test_the_check_is_where_the_model_is_bound():
    """processing binds the dims for every command (``profile`` too, through ``bind_batch``)."""
    from benanza.errors import UsageError
    from benanza.processing.model import bind_batch, load_graph, process

    with pytest.raises(UsageError, match="batch is the batch dimension, which --batch sets"):
        process(PREFILL, 32, {"batch": 5, "seq": 8})
    model, _ = load_graph(PREFILL)
    with pytest.raises(UsageError, match="has no dimension 'foo'"):
        bind_batch(model, 2, {i.name for i in model.graph.initializer}, {"seq": 8, "foo": 1})
    assert process(PREFILL, 3, {"batch": 3, "seq": 8}).batch == 3


@pytest.mark.parametrize("dims,msg", [
    (["seq=0"], "--dim 'seq=0': expected NAME=POSITIVE_INTEGER"),
    (["seq=-3"], "--dim 'seq=-3': expected NAME=POSITIVE_INTEGER"),
    (["seq=x"], "--dim 'seq=x': expected NAME=INTEGER"),
    (["=4"], "--dim '=4': expected NAME=POSITIVE_INTEGER"),
    (["seq=2147483648"], "--dim seq=2147483648: above 2^31 - 1"),
    (["seq=8", "seq=16"], "--dim seq given twice (8 and 16)"),
])
def test_dim_values_are_positive_integers_given_once(dims, msg):
    from benanza.errors import UsageError
    from benanza.spec import parse_dims

    with pytest.raises(UsageError) as e:
        parse_dims(dims)
    assert msg in str(e.value)
    assert parse_dims(["seq=8", "seq=8"]) == {"seq": 8}


# ----------------------------------------------------------------------------------- 9: benanza torch


class _Module:
    """The stand-in of ``torch.nn.Module``: what a factory must return."""

    def eval(self):
        return self


@pytest.fixture
def fake_torch(monkeypatch, tmp_path):
    """A stand-in ``torch`` (``torch.nn.Module`` only) and user modules on ``sys.path``."""
    from benanza.processing import modules

    torch = types.ModuleType("torch")
    torch.nn = types.SimpleNamespace(Module=_Module)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(modules, "require", lambda *a, **k: None)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bz_user_factories.py").write_text(
        "import sys\n"
        "def raising():\n    raise ValueError('no such width: 7')\n"
        "def exiting():\n    sys.exit(3)\n"
        "def returns_text():\n    return 'resnet'\n"
        "def good():\n    return sys.modules['torch'].nn.Module()\n"
        "def needs(width):\n    return sys.modules['torch'].nn.Module()\n")
    monkeypatch.delitem(sys.modules, "bz_user_factories", raising=False)
    return modules


@pytest.mark.parametrize("fn,msg", [
    ("raising", "module spec 'bz_user_factories:raising': raising() raised ValueError: no such width: 7"),
    ("exiting", "module spec 'bz_user_factories:exiting': the factory exited (SystemExit 3)"),
    ("returns_text", "module spec 'bz_user_factories:returns_text': returns_text() returned str, not a "
                     "torch.nn.Module"),
])
def test_a_factory_that_fails_is_one_usage_error(fake_torch, fn, msg):
    from benanza.errors import UsageError

    src = fake_torch.resolve(f"bz_user_factories:{fn}")
    with pytest.raises(UsageError) as e:
        src.build()
    assert str(e.value) == msg
    assert isinstance(fake_torch.resolve("bz_user_factories:good").build(), _Module)


@pytest.mark.parametrize("spec,msg", [
    ("os:system", "module spec 'os:system': os.system is not a torch.nn.Module factory (it takes arguments: "
                  "command; a factory takes none)"),
    ("bz_user_factories:needs", "module spec 'bz_user_factories:needs': bz_user_factories.needs is not a "
                                "torch.nn.Module factory (it takes arguments: width; a factory takes none)"),
    ("bz_user_factories:nothing", "module spec 'bz_user_factories:nothing': 'bz_user_factories' has no callable "
                                  "'nothing'"),
])
def test_a_spec_that_is_not_a_model_factory_is_refused(fake_torch, spec, msg):
    from benanza.errors import UsageError

    with pytest.raises(UsageError) as e:
        fake_torch.resolve(spec)
    assert str(e.value) == msg


def test_a_torchvision_name_it_has_no_model_of_is_refused(fake_torch, monkeypatch):
    from benanza.errors import UsageError

    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(list_models=lambda module=None: ["resnet18", "resnet50", "vit_b_16"])
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    with pytest.raises(UsageError) as e:
        fake_torch.resolve("torchvision:nope")
    assert str(e.value) == ("module spec 'torchvision:nope': torchvision has no model 'nope' "
                            "(torchvision.models.list_models() names its 3 models)")
    with pytest.raises(UsageError, match=r"torchvision has no model 'resnt50' \(did you mean resnet50"):
        fake_torch.resolve("torchvision:resnt50")
    assert fake_torch.resolve("torchvision:resnet50").name == "resnet50"


class GPT2Config:
    """The stand-in of a transformers configuration: GPT-2's defaults (bos_token_id annotated as optional, as
    transformers 5's dataclass configurations annotate theirs)."""

    bos_token_id: int | None

    def __init__(self):
        self.n_layer, self.n_head, self.n_embd, self.vocab_size = 12, 12, 768, 50257
        self.max_position_embeddings, self.layer_norm_epsilon, self.activation_function = 1024, 1e-5, "gelu_new"
        self.num_hidden_layers, self.num_attention_heads, self.hidden_size = 12, 12, 768
        self.tie_word_embeddings, self.bos_token_id = True, 50256

    def to_json_string(self, use_diff=False):
        return repr(sorted(vars(self).items()))


@pytest.fixture
def fake_transformers(fake_torch, monkeypatch):
    tf = types.ModuleType("transformers")
    tf.AutoConfig = types.SimpleNamespace(for_model=lambda mt: GPT2Config() if mt == "gpt2" else (_ for _ in ()).throw(
        ValueError(mt)))
    tf.AutoModelForCausalLM = types.SimpleNamespace(_model_mapping={GPT2Config: None})  # GPT-2 has an LM head
    monkeypatch.setitem(sys.modules, "transformers", tf)
    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(list_models=lambda module=None: ["resnet50"])
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    return fake_torch


@pytest.mark.parametrize("query,msg", [
    ("n_layer=abc", "n_layer=abc: GPT2Config's n_layer is an int (12), not 'abc'"),
    ("n_layer=2.5", "n_layer=2.5: GPT2Config's n_layer is an int (12), not 2.5"),
    ("n_layer=-2", "n_layer=-2: GPT2Config's n_layer is a non-negative int (12), not -2"),
    ("n_layer=True", "n_layer=True: GPT2Config's n_layer is an int (12), not True"),
    ("layer_norm_epsilon=big", "layer_norm_epsilon=big: GPT2Config's layer_norm_epsilon is a float (1e-05), "
                               "not 'big'"),
    ("tie_word_embeddings=3", "tie_word_embeddings=3: GPT2Config's tie_word_embeddings is a bool (True), not 3"),
    ("n_layr=2", "the GPT2Config has no 'n_layr'"),
])
def test_transformers_overrides_of_the_wrong_type_are_refused(fake_transformers, query, msg):
    from benanza.errors import UsageError

    with pytest.raises(UsageError) as e:
        fake_transformers.resolve(f"transformers:gpt2?{query}")
    assert str(e.value) == f"transformers spec 'gpt2?{query}': {msg}"
    ok = fake_transformers.resolve("transformers:gpt2?n_layer=2&layer_norm_epsilon=1&activation_function=relu")
    assert ok.name == "gpt2_n_layer2_layer_norm_epsilon1_activation_functionrelu"


@pytest.mark.parametrize("value", ["None", "none", "null"])
def test_an_optional_field_takes_none(fake_transformers, value):
    """DeepSeek-V2-Lite's q_lora_rank=none (``q_lora_rank: int | None``: no query compression): None, or
    none/null, for a field the configuration class annotates as optional; refused for one it does not."""
    from benanza.errors import UsageError

    src = fake_transformers.resolve(f"transformers:gpt2?bos_token_id={value}&n_layer=2")
    assert "('bos_token_id', None)" in src.identity["transformers"] and "('n_layer', 2)" in src.identity["transformers"]
    with pytest.raises(UsageError) as e:
        fake_transformers.resolve(f"transformers:gpt2?n_layer={value}")
    shown = "None" if value == "None" else repr(value)
    assert str(e.value) == f"transformers spec 'gpt2?n_layer={value}': n_layer={value}: GPT2Config's n_layer is an " \
                           f"int (12), not {shown}"


def test_a_spec_with_many_overrides_keeps_a_short_distinct_name(fake_transformers):
    """A tiny DeepSeek-V2-Lite spec has 17 overrides: its name was 290 characters, and the export's file name too
    long for the file system ("benanza: ...: file name too long"). Long names keep their first characters and a
    digest of the whole."""
    many = ("n_layer=2&n_head=12&n_embd=768&vocab_size=50257&max_position_embeddings=1024&layer_norm_epsilon=1e-05"
            "&activation_function=gelu_new&num_hidden_layers=12&num_attention_heads=12&hidden_size=768")
    a = fake_transformers.resolve(f"transformers:gpt2?{many}")
    b = fake_transformers.resolve(f"transformers:gpt2?{many.replace('n_layer=2', 'n_layer=3')}")
    assert len(a.name) == 120 and a.name.startswith("gpt2_n_layer2_n_head12_") and a.name != b.name
    assert fake_transformers.resolve("transformers:gpt2?n_layer=2").name == "gpt2_n_layer2"


def test_an_optional_annotation_is_read_from_the_class_or_its_text():
    from benanza.processing.modules import _admits_none

    base = type("Base", (), {"__annotations__": {"a": int | None, "b": int, "c": "Optional[int]"}})
    cfg = type("Cfg", (base,), {"__annotations__": {"d": "int | None", "e": "list[int]"}})()
    assert [_admits_none(cfg, k) for k in "abcdef"] == [True, False, True, True, False, False]


def test_none_is_taken_only_for_a_field_the_configuration_declares_optional(fake_transformers):
    """DeepSeek-V2-Lite's q_lora_rank=None (DeepseekV3Config's ``q_lora_rank: int | None``) passes; None for
    an int field without None in its annotation is refused as before."""
    from benanza.errors import UsageError
    from benanza.processing.modules import _check_override

    class Cfg:
        q_lora_rank: int | None = 1536
        n_layer: int = 12

    _check_override("deepseek_v3?q_lora_rank=None", Cfg(), "q_lora_rank", None)
    with pytest.raises(UsageError, match="n_layer is an int"):
        _check_override("x?n_layer=None", Cfg(), "n_layer", None)


def test_a_sequence_beyond_the_models_positions_is_refused(fake_transformers):
    from benanza.errors import UsageError

    with pytest.raises(UsageError) as e:
        fake_transformers.resolve("transformers:gpt2", seq=2048)
    assert str(e.value) == ("--seq 2048: GPT2Config holds 1024 positions (max_position_embeddings); give at most "
                            "1024 or raise it: transformers:gpt2?max_position_embeddings=2048")
    with pytest.raises(UsageError, match=r"--kv-len 1024: GPT2Config holds 1024 positions \(max_position_embeddings\)"
                                         r"; a decode step reads the cache and 1 new token"):
        fake_transformers.resolve("transformers:gpt2", phase="decode", kv_len=1024)
    with pytest.raises(UsageError, match=r"^--seq 2048: GPT2Config holds 1024 positions"):
        fake_transformers.resolve("gpt2", seq=2048)  # a bare alias: the same words, not "unknown module spec"
    with pytest.raises(UsageError, match=r"^unknown module spec 'nosuchmodel'"):
        fake_transformers.resolve("nosuchmodel")
    assert fake_transformers.resolve("transformers:gpt2", seq=1024).name == "gpt2"
    assert fake_transformers.resolve("transformers:gpt2?max_position_embeddings=4096", seq=2048)


@pytest.mark.parametrize("args,msg", [
    (["--seq", "-7"], "benanza: --seq -7: give a length of 1 to 1048576 tokens"),
    (["--seq", "0"], "benanza: --seq 0: give a length of 1 to 1048576 tokens"),
    (["--seq", "1000000000"], "benanza: --seq 1000000000: give a length of 1 to 1048576 tokens"),
    (["--phase", "decode", "--kv-len", "0"], "benanza: --kv-len 0: give a length of 1 to 1048576 tokens"),
    (["--phase", "decode", "--kv-len", "2000000"], "benanza: --kv-len 2000000: give a length of 1 to 1048576 "
                                                   "tokens"),
])
def test_torch_lengths_are_range_checked_before_anything(tmp_path, args, msg):
    """`--seq 1000000000` tried to allocate 512 GB (exit 70); checked before torch is looked for."""
    p = bz("torch", "transformers:gpt2", "--no-bench", "-o", tmp_path / "out", *args)
    assert one_line_error(p, 2) == msg
    assert not (tmp_path / "out").exists()


def test_torch_without_torch_is_one_line(tmp_path):
    if sys.modules.get("torch") is not None or __import__("importlib").util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: the message for its absence cannot show")
    p = bz("torch", "resnet50", "--no-bench", "-o", tmp_path / "out")
    assert "needs torch, which is not installed" in one_line_error(p, 2)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fn,msg", [
    ("raising", "benanza: module spec 'bz_user_factories:raising': raising() raised ValueError: no such width: 7"),
    ("exiting", "benanza: module spec 'bz_user_factories:exiting': the factory exited (SystemExit 3)"),
])
def test_torch_command_with_a_failing_factory_leaves_no_folder(fake_torch, tmp_path, fn, msg):
    """The command in this process (the stand-in torch is in its sys.modules): exit 2, one line, and
    the -o folder it made is gone; a folder that was there before stays."""
    from typer.testing import CliRunner

    from benanza.cli import app

    out = tmp_path / "work"
    r = CliRunner().invoke(app, ["torch", f"bz_user_factories:{fn}", "--no-bench", "-o", str(out)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("benanza: ")]
    assert lines == [msg] and "Traceback" not in r.output
    assert not out.exists()
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    r = CliRunner().invoke(app, ["torch", f"bz_user_factories:{fn}", "--no-bench", "-o", str(out)])
    assert r.exit_code == 2 and (out / "mine.txt").read_text() == "kept"


# ------------------------------------------------------------------------- 14: --optimizer without --train


@pytest.mark.parametrize("cmd", [
    ["analyze", PREFILL, "--dim", "seq=8", "--db", REF_DB],
    ["predict", PREFILL, "--dim", "seq=8", "--db", REF_DB, "--to", "h100-sxm"],
    ["generate", PREFILL, "--dim", "seq=8", "-o", "{tmp}/suite"],
    ["bench", PREFILL, "--dim", "seq=8", "--db", "{tmp}/perf.db", "-o", "{tmp}/suite"],
    ["torch", "resnet50", "--no-bench", "-o", "{tmp}/out"],
])
def test_optimizer_without_train_is_refused_by_every_command(cmd, tmp_path):
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in cmd]
    p = bz(*args, "--optimizer", "lamb")
    assert one_line_error(p, 2) == "benanza: --optimizer goes with --train (the optimizer of the training step)"
    p = bz(*args, "--train", "--optimizer", "lamb")
    assert one_line_error(p, 2) == "benanza: --optimizer must be one of sgd, adam, adamw, got 'lamb'"
    assert sorted(x.name for x in tmp_path.iterdir()) == []


def test_a_zoo_takes_each_dim_where_a_model_has_it():
    """`bench` over several models: a --dim applies to the models that have that dimension (a
    transformer's seq beside a CNN), and a name no model has is refused."""
    from benanza.errors import UsageError
    from benanza.usecases.bench import dims_per_model

    cnn = REPO / "tests" / "data" / "zoo" / "models" / "resnet18.onnx"
    per = dims_per_model([PREFILL, cnn], {"seq": 8})
    assert per == {PREFILL: {"seq": 8}, cnn: {}}
    with pytest.raises(UsageError, match="none of the 2 models has a dimension 'foo'"):
        dims_per_model([PREFILL, cnn], {"seq": 8, "foo": 3})
    assert dims_per_model([cnn], {"foo": 3}) == {cnn: {"foo": 3}}  # one model: its own check names its dims


def test_a_private_override_survives_the_configuration_made_again(monkeypatch):
    """``?_experts_implementation=batched_mm`` was accepted, named in the label, and then dropped when the
    model type's configuration was made again from the overrides (its constructor takes no private
    field): the model ran transformers' default experts, silently."""
    from benanza.processing import modules

    class MoeConfig:
        model_type = "qwen3_moe"

        def __init__(self, **kw):
            self.num_experts, self._experts_implementation = 8, None
            for k, v in kw.items():
                if not k.startswith("_"):  # as transformers' constructors: private fields are not arguments
                    setattr(self, k, v)

    tf = types.ModuleType("transformers")
    tf.AutoConfig = types.SimpleNamespace(for_model=lambda mt, **kw: MoeConfig(**kw))
    monkeypatch.setitem(sys.modules, "transformers", tf)
    cfg = modules._with_overrides("qwen3_moe?...", "qwen3_moe", MoeConfig(),
                                  {"num_experts": 4, "_experts_implementation": "batched_mm"})
    assert (cfg.num_experts, cfg._experts_implementation) == (4, "batched_mm")


def test_head_dim_is_taken_where_a_model_reads_it_though_its_class_has_none(monkeypatch):
    """Qwen3-MoE reads ``getattr(config, "head_dim", hidden // heads)``; its released config.json sets 128,
    which its configuration class does not define: ``?head_dim=128`` was refused ("has no 'head_dim'"), so
    Qwen3-30B-A3B's attention could not be built at its width. Other unknown keys are still refused."""
    from benanza.errors import UsageError
    from benanza.processing import modules

    class MoeConfig:
        model_type = "qwen3_moe"

        def __init__(self, **kw):
            self.hidden_size = 2048
            for k, v in kw.items():
                setattr(self, k, v)

    tf = types.ModuleType("transformers")
    tf.AutoConfig = types.SimpleNamespace(for_model=lambda mt, **kw: MoeConfig(**kw))
    monkeypatch.setitem(sys.modules, "transformers", tf)
    cfg = modules._with_overrides("q", "qwen3_moe", MoeConfig(), {"head_dim": 128})
    assert cfg.head_dim == 128
    with pytest.raises(UsageError, match="head_dim=-1"):
        modules._with_overrides("q", "qwen3_moe", MoeConfig(), {"head_dim": -1})
    with pytest.raises(UsageError, match="has no 'head_dims'"):
        modules._with_overrides("q", "qwen3_moe", MoeConfig(), {"head_dims": 128})
