# Sourced by the GPU scripts in this folder (run from the repository root on the lent GPU machine,
# which has no package index): the cudnn-frontend headers carried in .fe/include; SQLAlchemy,
# Alembic, Mako (and onnx2torch for `benanza profile`) carried as wheels in .whl/, installed into
# /tmp/site and put on PYTHONPATH; then benanza itself without build isolation. Returns non-zero
# when an install fails.
if [ -f .fe/include/cudnn_frontend.h ]; then export CUDNN_FRONTEND_INCLUDE="$PWD/.fe/include"; fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index . > /tmp/benanza-install.log 2>&1 \
    || { tail -20 /tmp/benanza-install.log; return 1; }
