# Sourced by the GPU scripts in this folder (run from the repository root on the lent GPU machine,
# which has no package index): the cudnn-frontend headers carried in .fe/include (or .fez/include.tar.xz); SQLAlchemy,
# Alembic, Mako (and onnx2torch for `benanza profile`) carried as wheels in .whl/, installed into
# /tmp/site and put on PYTHONPATH; then benanza itself without build isolation. Returns non-zero
# when an install fails. The wheels are byte-compiled as pip does by default (without it every
# benanza command compiled SQLAlchemy's 300 modules again: 1.6 s of a 3.5 s repeat).
# GPU_INSTALLED=1 (benchmarks/gpu_pair.sh, which installed once and exported PYTHONPATH and
# CUDNN_FRONTEND_INCLUDE): nothing to do; two scripts installing at once would collide in /tmp/site.
if [ "${GPU_INSTALLED:-0}" = 1 ]; then return 0; fi
if [ -f .fe/include/cudnn_frontend.h ]; then export CUDNN_FRONTEND_INCLUDE="$PWD/.fe/include"
elif [ -f .fez/include.tar.xz ]; then
  # the same headers as one xz archive (0.3 MB where the folder is 3.5 MB of the 64 MiB a call carries),
  # unpacked by Python's tarfile: the machine may have no xz program
  python3 -c 'import tarfile; tarfile.open(".fez/include.tar.xz").extractall("/tmp/fe", filter="data")' \
    && [ -f /tmp/fe/include/cudnn_frontend.h ] && export CUDNN_FRONTEND_INCLUDE=/tmp/fe/include
fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# Without build isolation the machine's setuptools builds (81 on the lent machines' python3.12 in
# 2026-11); pyproject.toml's SPDX `license` string needs setuptools >= 77 (a setuptools wheel carried
# in .whl/ is on PYTHONPATH by now). With an older one, build from a copy whose license is the old
# table form, which it reads; a system CUDA toolkit is there, so setup.py uses it.
_benanza_src=.
if ! python3 -c 'import sys, setuptools; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)'; then
  _benanza_src=/tmp/benanza-src
  rm -rf "$_benanza_src" && mkdir -p "$_benanza_src/db" \
    && cp -r setup.py pyproject.toml CMakeLists.txt README.md benanza cpp templates "$_benanza_src/" \
    && cp -r db/migrations "$_benanza_src/db/" || return 1
  sed -i 's/^license = "\(.*\)"$/license = { text = "\1" }/' "$_benanza_src/pyproject.toml"
  echo "gpu_install: setuptools $(python3 -c 'import setuptools; print(setuptools.__version__)') < 77:" \
       "building from $_benanza_src with the license as a table"
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index "$_benanza_src" > /tmp/benanza-install.log 2>&1 \
    || { tail -20 /tmp/benanza-install.log; return 1; }
