"""Which CUDA architectures a suite and the harness are compiled for: the GPUs' own where there is
one (no JIT of PTX when a suite starts on a fresh machine), a portable default without."""
import sys
import types

import pytest

from benanza.build import builder


@pytest.fixture(autouse=True)
def _fresh_device_query():
    """The device query is cached per process: each test sees its own fake devices, and leaves none."""
    builder._device_architectures.cache_clear()
    yield
    builder._device_architectures.cache_clear()


def _fake_native(monkeypatch, devices=None, error=None):
    builder._device_architectures.cache_clear()
    mod = types.ModuleType("benanza._native")

    def query_devices():
        if error:
            raise RuntimeError(error)
        return devices

    mod.query_devices = query_devices
    monkeypatch.setitem(sys.modules, "benanza._native", mod)
    import benanza
    monkeypatch.setattr(benanza, "_native", mod, raising=False)


def test_the_gpus_here_as_sass_only(monkeypatch):
    monkeypatch.delenv("BENANZA_CUDA_ARCHITECTURES", raising=False)
    _fake_native(monkeypatch, [{"compute_capability": "9.0"}, {"compute_capability": "9.0"},
                               {"compute_capability": "8.0"}])
    assert builder.local_architectures() == "90-real;80-real"


def test_no_gpu_leaves_the_template_default(monkeypatch):
    monkeypatch.delenv("BENANZA_CUDA_ARCHITECTURES", raising=False)
    _fake_native(monkeypatch, error="no CUDA device: CUDA driver version is insufficient")
    assert builder.local_architectures() is None
    _fake_native(monkeypatch, [{"compute_capability": "7.0"}])  # below what nvcc 13 compiles
    assert builder.local_architectures() is None


def test_environment_overrides(monkeypatch):
    _fake_native(monkeypatch, [{"compute_capability": "9.0"}])
    monkeypatch.setenv("BENANZA_CUDA_ARCHITECTURES", "portable")
    assert builder.local_architectures() == builder.PORTABLE_ARCHITECTURES
    monkeypatch.setenv("BENANZA_CUDA_ARCHITECTURES", "100-real")
    assert builder.local_architectures() == "100-real"


def test_a_configured_folder_keeps_its_architectures(tmp_path):
    (tmp_path / "build").mkdir()
    assert builder._configured_architectures(tmp_path) is None
    (tmp_path / "build" / "CMakeCache.txt").write_text(
        "CMAKE_BUILD_TYPE:STRING=Release\nCMAKE_CUDA_ARCHITECTURES:STRING=90-real\n")
    assert builder._configured_architectures(tmp_path) == "90-real"


def test_template_default_is_set_before_project():
    """project() fills CMAKE_CUDA_ARCHITECTURES with nvcc's default, so a default set after it
    never applies (it did not, until this test: the harness was sm_75 PTX, JIT-compiled on H100s)."""
    from benanza.generation.generator import templates_dir

    text = (templates_dir() / "CMakeLists.txt.j2").read_text()
    assert text.index("\n  set(CMAKE_CUDA_ARCHITECTURES") < text.index("\nproject(")
