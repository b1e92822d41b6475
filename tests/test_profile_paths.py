"""A profile folder's manifest names files inside the folder only (issue 53, item 13): profile.json's
``files`` (trace, cuDNN and cuBLASLt logs) that lead outside it (``..``, an absolute path, a symbolic
link) are refused with one line naming the key, before any file is read (one such profile read
/etc/passwd). The folder is a copy of a real H200 profile (tests/data/h200_profiles)."""
import json
import os
import shutil
from pathlib import Path

import pytest

from benanza.errors import ProfileError
from benanza.profiles.profile import load_profile, read_profile_json

HERE = Path(__file__).resolve().parent
REAL = HERE / "data" / "h200_profiles" / "resnet50_bnkept-b32-fp16"


def _profile(tmp_path: Path, **files) -> Path:
    folder = tmp_path / "prof"
    shutil.copytree(REAL, folder)
    d = json.loads((folder / "profile.json").read_text())
    d["files"] = {**d["files"], **files}
    (folder / "profile.json").write_text(json.dumps(d))
    return folder


@pytest.mark.parametrize("key,name", [("trace", "../outside/trace.json.gz"), ("trace", "/etc/passwd"),
                                      ("cudnn_log", "../../../../../../etc/passwd"), ("cublaslt_log", "/etc"),
                                      ("trace", "sub/../../outside/trace.json.gz")])
def test_a_file_outside_the_folder_is_refused(tmp_path, key, name):
    (tmp_path / "outside").mkdir()
    shutil.copy(REAL / "trace.json.gz", tmp_path / "outside" / "trace.json.gz")  # a valid trace, outside
    folder = _profile(tmp_path, **{key: name})
    for load in (read_profile_json, load_profile):
        with pytest.raises(ProfileError) as e:
            load(folder)
        msg = str(e.value)
        assert "outside the profile folder" in msg and f'"{key}"' in msg and "\n" not in msg, msg
        assert "root:" not in msg


def test_a_symbolic_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    shutil.copy(REAL / "trace.json.gz", tmp_path / "outside" / "t.json.gz")
    folder = _profile(tmp_path, trace="link.json.gz")
    os.symlink(tmp_path / "outside" / "t.json.gz", folder / "link.json.gz")
    with pytest.raises(ProfileError, match="outside the profile folder"):
        read_profile_json(folder)


def test_names_inside_the_folder_pass_and_other_values_are_refused(tmp_path):
    folder = _profile(tmp_path, trace="sub/trace.json.gz", cudnn_log=None)
    (folder / "sub").mkdir()
    shutil.move(str(folder / "trace.json.gz"), folder / "sub" / "trace.json.gz")
    assert read_profile_json(folder)["files"]["trace"] == "sub/trace.json.gz"
    for bad in (123, ["a"], "a\x00b"):
        f2 = _profile(tmp_path / str(abs(hash(repr(bad)))), cudnn_log=bad)
        with pytest.raises(ProfileError, match=r'"files"'):
            read_profile_json(f2)
