"""benanza torch's export step: an export is kept in its folder only when it is the same model, and a
torchvision or transformers model's export is shared between folders through the export cache
(benanza.processing.cache). The exporter is replaced by a stand-in that writes a small file and
counts its calls: what is checked is which command exports, which reuses, and that a reused export
is the right one. No PyTorch needed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import benanza.processing.modules as modules
import benanza.profiles.pytorch as pt
from benanza.processing.modules import Export, ModuleSource


@pytest.fixture
def exporter(monkeypatch, tmp_path):
    """The stand-in exporter (its calls: the identities it exported) and a private export cache."""
    monkeypatch.setenv("BENANZA_EXPORT_CACHE", str(tmp_path / "cache"))
    calls = []

    def fake_export(src, path, keep_batch_norms=False):
        calls.append(dict(src.identity or {}))
        path.write_bytes(json.dumps(src.identity).encode())
        return Export(path, "dynamo", 20, 40.0, path.stat().st_size, ("a note",))

    import benanza.profiles as profiles

    monkeypatch.setattr(pt, "export_onnx", fake_export)
    monkeypatch.setattr(profiles, "capture_profile", lambda *a, **k: None)
    return calls


def source(seq=128, cacheable=True, kind="transformers", name="llama"):
    return ModuleSource(name, kind, build=None, inputs=None, input_names=("input_ids",), batch_dims=(0,),
                        spec=f"transformers:{name}", identity={"transformers": "{config}", "phase": "prefill",
                                                               "seq": seq}, cacheable=cacheable)


def run(src, folder, **kw):
    seconds: dict = {}
    said: list = []
    path, _ = pt.prepare(src, folder, [1], "fp16", None, bench=False, seconds=seconds, say=said.append, **kw)
    return path, seconds, said


def test_an_export_of_another_length_in_the_same_folder_is_not_kept(tmp_path, exporter):
    """A prefill export's file name does not hold its sequence length: before, ``--seq 512`` after
    ``--seq 128`` in one folder kept the 128-token graph and compared it with a 512-token profile."""
    folder = tmp_path / "w"
    p1, s1, _ = run(source(128), folder)
    p2, s2, said = run(source(128), folder)
    assert exporter == [source(128).identity] and s2 == {} and any("exists, kept" in m for m in said)
    p3, s3, said = run(source(512, cacheable=False), folder)
    assert p3 == p1 and exporter[-1]["seq"] == 512 and len(exporter) == 2 and s3["export"] == 40.0
    assert json.loads(p3.read_text())["seq"] == 512
    assert any("exported again" in m for m in said)


def test_a_library_model_export_is_shared_between_folders(tmp_path, exporter):
    p1, s1, _ = run(source(), tmp_path / "fp16")
    p2, s2, said = run(source(), tmp_path / "bf16")
    assert len(exporter) == 1 and s1["export"] == 40.0 and s2["export"] < 5
    assert p2.read_bytes() == p1.read_bytes() and any("from the export cache" in m for m in said)
    assert pt.export_stamp(p2) == pt.export_stamp(p1) is not None
    # another length is another entry
    run(source(2048), tmp_path / "long")
    assert len(exporter) == 2


def test_a_users_module_is_never_taken_from_the_cache(tmp_path, exporter):
    run(source(cacheable=False, kind="factory"), tmp_path / "a")
    run(source(cacheable=False, kind="factory"), tmp_path / "b")
    assert len(exporter) == 2


def test_force_and_a_cache_turned_off_export_again(tmp_path, exporter, monkeypatch):
    run(source(), tmp_path / "a")
    run(source(), tmp_path / "a", force=True)
    assert len(exporter) == 2
    monkeypatch.setenv("BENANZA_EXPORT_CACHE", "off")
    run(source(), tmp_path / "b")
    assert len(exporter) == 3


def test_a_damaged_cache_entry_is_exported_again(tmp_path, exporter):
    run(source(), tmp_path / "a")
    entry = next((tmp_path / "cache").glob("*.onnx"))
    entry.write_bytes(b"trunc")
    p, s, _ = run(source(), tmp_path / "b")
    assert len(exporter) == 2 and json.loads(p.read_text())["seq"] == 128
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_the_export_key_follows_what_the_export_depends_on(monkeypatch):
    base = modules.export_key(source())
    assert base == modules.export_key(source()) and len(base) == 32
    assert modules.export_key(source(256)) != base
    assert modules.export_key(source(), keep_batch_norms=True) != base
    assert modules.export_key(ModuleSource("m", "object", None, None, (), ())) is None
    real = modules._dist_version
    monkeypatch.setattr(modules, "_dist_version", lambda d: "9.9" if d == "torch" else real(d))
    assert modules.export_key(source()) != base


def test_the_export_key_follows_the_code_that_changes_the_export(monkeypatch, tmp_path):
    """The real-valued rotary (rope.py), the absorbed MLA (mla.py) and the translations change what an export
    holds: an edit of any of them is another key."""
    from benanza.processing import rope

    base = modules.export_key(source())
    edited = tmp_path / "rope.py"
    edited.write_text(Path(rope.__file__).read_text() + "\n# edited\n")
    monkeypatch.setattr(rope, "__file__", str(edited))
    assert modules.export_key(source()) != base


def test_a_factory_modules_identity_changes_when_its_file_is_edited(tmp_path, monkeypatch):
    (tmp_path / "mynet_ec.py").write_text("def model():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # the identity is read from the file, without torch (CI has none): its check stands aside here
    monkeypatch.setattr(modules, "require", lambda *a, **k: None)
    a = modules.resolve("mynet_ec:model", input_shape=(3, 64, 64))
    assert not a.cacheable and a.identity["input_shape"] == [3, 64, 64] and a.identity["source"]
    assert modules.resolve("mynet_ec:model", input_shape=(3, 32, 32)).identity != a.identity
    (tmp_path / "mynet_ec.py").write_text("def model():\n    return 1\n")
    sys.modules.pop("mynet_ec", None)
    assert modules.resolve("mynet_ec:model", input_shape=(3, 64, 64)).identity != a.identity
