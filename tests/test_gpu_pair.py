"""benchmarks/gpu_pair.sh: several GPU scripts at once on a lent machine of several GPUs, each on its
own GPU with its own results folder (no GPU here: nvidia-smi is a stand-in that lists two GPUs, and
GPU_INSTALLED=1 skips the install, as the pair itself sets it for its commands); more files than the machine
sends back are packed per command."""
import os
import stat
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _fake_smi(tmp_path, gpus):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    lines = "\n".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})" for i in range(gpus))
    smi.write_text(f'#!/bin/sh\nif [ "$1" = -L ]; then printf "%s\\n" "{lines}"; else echo "0, NVIDIA H100"; fi\n')
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_INSTALLED": "1"}


def test_each_command_gets_its_own_gpu_and_folder(tmp_path):
    env = _fake_smi(tmp_path, 2)
    out = tmp_path / "out"
    cmd = 'echo "$CUDA_VISIBLE_DEVICES" > "$SUB/gpu"; echo hello'
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(out), cmd, cmd, cmd + "; exit 3"], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stdout + p.stderr  # the first non-zero exit of the commands
    assert [(out / f"g{i}" / "gpu").read_text().strip() for i in range(3)] == ["0", "1", "0"]  # round robin
    assert "[g0] hello" in p.stdout and "[g1] hello" in p.stdout and "[g2] hello" in p.stdout
    assert "3 commands on 2 GPUs" in p.stdout


def test_no_command_is_an_error(tmp_path):
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(tmp_path / "out")], cwd=REPO,
                       env=_fake_smi(tmp_path, 2), capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "gpu_pair: no command" in p.stdout


def test_more_files_than_the_machine_returns_are_packed_per_command(tmp_path):
    env = _fake_smi(tmp_path, 2)
    out = tmp_path / "out"
    # four commands of three files each: 12 files, more than the 8 a lent machine sends back
    cmd = 'for f in table.txt gpu_truth.log truth-db.sqlite.gz; do echo "$f $CUDA_VISIBLE_DEVICES" > "$SUB/$f"; done'
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(out), cmd, cmd, cmd, cmd], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["g0.tgz", "g1.tgz", "g2.tgz", "g3.tgz"]
    with tarfile.open(out / "g3.tgz") as t:
        assert sorted(t.getnames()) == ["g3", "g3/gpu_truth.log", "g3/table.txt", "g3/truth-db.sqlite.gz"]
        assert t.extractfile("g3/table.txt").read() == b"table.txt 1\n"  # the fourth command ran on GPU 1
    assert "12 files, more than the 8" in p.stdout


def test_a_plan_file_gives_the_commands(tmp_path):
    """--plan FILE: one command per line, blank lines and # comments skipped (a call's command line holds 2,000
    characters; the plan, checked in beside its results, records what ran)."""
    plan = tmp_path / "plan.txt"
    plan.write_text('# a comment\n\necho "one $CUDA_VISIBLE_DEVICES" > "$SUB/x"\n  # indented comment\n'
                    'echo "two $CUDA_VISIBLE_DEVICES" > "$SUB/x"\n')
    out, env = tmp_path / "out", _fake_smi(tmp_path, 2)
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(out), "--plan", str(plan)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 commands on 2 GPUs" in p.stdout
    assert [(out / f"g{i}" / "x").read_text() for i in range(2)] == ["one 0\n", "two 1\n"]
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(out), "--plan", str(tmp_path / "none.txt")], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "no plan file" in p.stdout


def test_a_packed_folder_over_15_mib_is_packed_without_its_bulky_archives(tmp_path):
    """A returned file has at most 16 MiB (2026-11-28c: four folders of runs archives came back as nothing): a
    command's packed folder over 15 MiB is packed again without its runs archives and databases."""
    env = _fake_smi(tmp_path, 1)
    out = tmp_path / "out"
    cmd = ('for f in a b c d e f g h i; do echo "$f" > "$SUB/$f.txt"; done; '
           'head -c 17000000 /dev/urandom > "$SUB/llm-runs.tar.gz"')
    p = subprocess.run(["bash", "benchmarks/gpu_pair.sh", str(out), cmd], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "g0.tgz over 15 MiB" in p.stdout
    tgz = out / "g0.tgz"
    assert tgz.stat().st_size < 1 << 20
    with tarfile.open(tgz) as t:
        names = t.getnames()
    assert "g0/a.txt" in names and "g0/llm-runs.tar.gz" not in names
