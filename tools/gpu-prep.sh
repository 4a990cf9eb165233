#!/usr/bin/env bash
# Before a GPU session, on this machine: make what its calls carry (the GPU
# machine reaches no package registry, and gets only the working tree and
# the paths a call names in `carry`).
#
#   bash tools/gpu-prep.sh [BASE]
#
#   .wheels/   the cp312 manylinux_2_28 wheel, built as CI builds it
#              (tools/build-wheels.py: the runtime from PyPI's wheels), for
#              `gpu-check.sh wheel`; plus apache-tvm-ffi's wheel when pip
#              can fetch it (tests/test_exchange.py uses it there)
#   .ab-base/  a worktree of BASE (default 4761612, before the structure
#              and scale work) for `GPU_CHECK_AB="PYTHONPATH=$PWD/.ab-base"
#              gpu-check.sh ab` and `GPU_CHECK_SCALE=... gpu-check.sh scale`
#
# Both are listed in .git/info/exclude; name them in the call's `carry`.
# The GPU machine's Python is 3.12, hence a 3.12 here (PYTHON312 to choose).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-4761612}
say() { echo "gpu-prep: $*" >&2; }

mkdir -p .git/info
for p in /.wheels/ /.ab-base/; do
    grep -qxF "$p" .git/info/exclude 2>/dev/null || echo "$p" >>.git/info/exclude
done

if [ ! -d .ab-base ]; then
    say "worktree of $base in .ab-base"
    git worktree add -f --detach .ab-base "$base" >/dev/null
fi

py=${PYTHON312:-}
for cand in $(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null) python3.12; do
    [ -z "$py" ] && "$cand" -c "" 2>/dev/null && py=$cand
done
[ -n "$py" ] || { say "no Python 3.12 found (set PYTHON312)"; exit 1; }
say "building the cp312 wheel with $py (tools/build-wheels.py, as CI does)"
rm -rf .wheels
python3 tools/build-wheels.py --python "$py" --out .wheels --require host,cuda,hip
python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 \
    -d .wheels apache-tvm-ffi 2>/dev/null || say "apache-tvm-ffi not fetched (its tests will skip there)"
say "ready: $(ls .wheels | tr '\n' ' ')and .ab-base at $(git -C .ab-base log --oneline -1 | cut -c1-60)"
