"""The harness's strided-copy kernel on a real GPU (skipped without one): every transfer of the
Transpose/Concat/Slice/Pad cases of vit_b_16, googlenet and a padded image moves exactly the bytes of
a CPU reference, in fp32 and fp16, on the plan's paths (16-byte vectors, shared-memory tiles, plain
strided); the large vit transposes reach at least half the DRAM copy rate benanza measures as a
ceiling (1/5 for the tiled transposes: 2-byte elements through 32 x 32 tiles reach 24 % of it on an H200,
against about 10 % for the plain strided loop they replaced).

Run on a GPU machine: pytest tests/test_strided_copy_gpu.py -s"""
import subprocess

import pytest

from benanza import kinds as L
from benanza.build.cudalibs import locate
from benanza.kinds import REGISTRY, Job

_copy_case = REGISTRY["Copy"].case
from conftest import HERE, REPO, have_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")]

CASES = {  # name: (config, minimum share of the DRAM copy rate for the transfer at fp16)
    # vit_b_16 at batch 32 (torch.onnx export of nn.MultiheadAttention)
    "vit-qkv": (L.CopyConfig("Transpose", ((197, 32, 3, 768),), (3, 197, 32, 768), (("perm", (2, 0, 1, 3)),)), 0.5),
    "vit-heads": (L.CopyConfig("Transpose", ((197, 384, 64),), (384, 197, 64), (("perm", (1, 0, 2)),)), 0.5),
    "vit-kT": (L.CopyConfig("Transpose", ((32, 12, 197, 64),), (32, 12, 64, 197), (("perm", (0, 1, 3, 2)),)), 0.2),
    "vit-patches": (L.CopyConfig("Transpose", ((32, 768, 196),), (32, 196, 768), (("perm", (0, 2, 1)),)), 0.2),
    "concat": (L.CopyConfig("Concat", ((32, 64, 28, 28), (32, 96, 28, 28)), (32, 160, 28, 28), (("axis", (1,)),)), 0),
    "slice-odd": (L.CopyConfig("Slice", ((3, 7, 9, 11),), (3, 3, 9, 5), (("starts", (0, 1, 0, 1)), ("steps", (1, 2, 1, 2)))), 0),
    "pad": (L.CopyConfig("Pad", ((2, 3, 5, 5),), (2, 3, 7, 7), (("pads", (0, 0, 1, 1, 0, 0, 1, 1)),)), 0),
}


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    libs = locate()
    exe = tmp_path_factory.mktemp("sc") / "strided_copy_check"
    subprocess.run([str(libs.nvcc), "-O2", "-std=c++17", "-arch=native", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}", str(HERE / "data" / "strided_copy_check.cu"),
                    str(REPO / "cpp" / "src" / "kernels.cu"), "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="module")
def dram_gbs(checker):
    """A contiguous 256 MiB copy through the same kernel: the rate the transposes are held to."""
    n = 128 << 20
    out = subprocess.run([str(checker), "2", str(n), str(n), "1", str(n), "1", "1"], capture_output=True, text=True)
    return float(out.stdout.split()[4])


@pytest.mark.parametrize("es", [4, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_strided_copy_matches_the_reference(checker, dram_gbs, name, es):
    cfg, share = CASES[name]
    case = _copy_case(cfg, Job("j", cfg, "fp16" if es == 2 else "fp32", "n"))
    parse = lambda s: [int(v) for v in s.strip("{}").split(",")]  # noqa: E731
    for t in case.transfers:
        nd = t.nd
        src_n = L.numel(cfg.inputs[t.src_index]) - t.src_offset
        dst_n = L.numel(cfg.y) - t.dst_offset
        args = [str(es), str(src_n), str(dst_n), str(nd)] + [str(v) for k in ("dims", "src_strides", "dst_strides")
                                                             for v in parse(getattr(t, k))[:nd]]
        out = subprocess.run([str(checker)] + args, capture_output=True, text=True, timeout=120)
        print(name, es, out.stdout.strip(), f"(contiguous {dram_gbs:.0f} GB/s)")
        assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr
        if es == 2 and share:
            assert float(out.stdout.split()[4]) >= share * dram_gbs, out.stdout
