#!/usr/bin/env bash
# On the GPU machine, in one call: build, run the whole suite on the CUDA
# backend, run the benchmarks and the main job.  Logs go to $OUT (if set).
#   bash tools/gpu-check.sh            everything
#   bash tools/gpu-check.sh tests      build + tests only, the default run (GPU_CHECK_STAGED=1: the staged
#                                      variant too; GPU_CHECK_HOST=1: the host suite too; each about 5
#                                      minutes more, past the 10 a call may run on one H200 with the default
#                                      run's 6; with PYGPU_REGISTER_LIMIT=0: no host buffer page-locked in place)
#   bash tools/gpu-check.sh staged     build + the default run with every pageable copy staged, alone
#   bash tools/gpu-check.sh slow       build + the long runs (pytest -m slow: the sanitized builds, the C
#                                      units under valgrind...), apart: with them a call ran past 10 minutes
#   bash tools/gpu-check.sh bench      build + everything but the tests
#   bash tools/gpu-check.sh devices    build + the multi-device and MPI tests (and the main job's peers
#                                      section and bench --devices, tested) + the peers section + bench
#                                      --devices + tools/research/peer-costs.py + capture-peer.c + the MPI ping-pong (pygpu.bench_mpi) + benchmarks/test_devices.py + every device transferring
#                                      at once (bench_scale.registered_at_once: registration off, then on: as
#                                      the default limit or PYGPU_REGISTER_LIMIT's; 64 and 256 MiB), 2 rounds, and the host's floors
#   bash tools/gpu-check.sh copies     build + the tests of copies on the device + bench --copies
#   bash tools/gpu-check.sh wheel      no build: the wheel carried in .wheels/ (built here with the CUDA
#                                      runtime from PyPI, see .ci/run) installed into a fresh venv, the
#                                      kernels' first use (PTX compiled by the driver), the transfer and
#                                      device-copy bench, the suite against the installed wheel
#   bash tools/gpu-check.sh scale      build + the thread, transfer and background-upload tests + python -m pygpu.bench --scale
#                                      (threads, small beside big, async), as built and for each setting
#                                      in $GPU_CHECK_SCALE (e.g. PYTHONPATH=$PWD/.ab-base: an earlier commit,
#                                      measured by this checkout's bench_scale), taking turns, 2 rounds;
#                                      then tools/research/threads-sweep.py (8 threads against chunk and
#                                      thread settings, interleaved)
#   bash tools/gpu-check.sh probes     no build: the C probes of tools/research (fresh-fill, register-fresh,
#                                      wc-probe, down-slots, batch-copy, ipc-probe: the host's floors for fresh
#                                      destinations and mid-size downloads, the runtime's batched copy,
#                                      device memory between two processes (IPC pools against legacy handles),
#                                      pinned-query: the runtime calls around a small copy; capture-unsafe: the
#                                      calls a capture in global mode refuses; mailbox-floor:
#                                      pygpu.mpi's exchange as C between two processes, its floor; lock-ways:
#                                      cudaHostAlloc against faulting in and registering, and what each holds;
#                                      docs/performance.md), compiled and run
#   bash tools/gpu-check.sh stress     build + tests/test_stress.py for GPU_CHECK_STRESS_S seconds a case (default 90:
#                                      threads moving data at random, every result checked) + the fuzz tests
#                                      hunting GPU_CHECK_EXAMPLES fresh examples each (default 300)
#   bash tools/gpu-check.sh marks      a build with marks (CFLAGS=-DPYGPU_MARKS, research only, removed after):
#                                      tools/research/call-marks.py --after 64K 256K 1M: where a mid-size
#                                      call's time goes, before and after bench --scale's beside and fresh
#                                      sections (docs/performance.md: mid-size calls slow down after them;
#                                      GPU_CHECK_MARKS="ARGS;ARGS...": call-marks.py's arguments instead, a process each);
#                                      tools/research/workers-wake.c: a job with more workers started than it
#                                      wants (and with .ab-base's workers.c, an earlier commit's, if there)
#   bash tools/gpu-check.sh ab         build + python -m pygpu.bench (8 B to 256 MiB, no peers), then
#                                      tools/research/ab-staging.py: as built against each setting
#                                      in $GPU_CHECK_AB (default AB_THREADS=8), interleaved, 3 rounds
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pygpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYGPU_BACKEND=cuda
what=${1:-all}

echo "== machine"
nvidia-smi --query-gpu=name,pci.bus_id,uuid,memory.total,driver_version --format=csv,noheader
echo "NUMA nodes online: $(cat /sys/devices/system/node/online 2>/dev/null || echo unknown);" \
    "the GPUs': $(for d in /sys/bus/pci/drivers/nvidia/0*; do cat "$d/numa_node"; done 2>/dev/null | tr '\n' ' ')"
python3 -c "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)"

if [ "$what" = probes ]; then
    cuda=${CUDA_HOME:-/usr/local/cuda}
    for name in fresh-fill register-fresh wc-probe down-slots batch-copy ipc-probe pinned-query capture-unsafe mailbox-floor lock-ways; do   # (built once each)
        gcc -O2 -msse4.1 -pthread -I"$cuda/include" "tools/research/$name.c" -L"$cuda/lib64" -lcudart -lcuda \
            -o "/tmp/$name" || rm -f "/tmp/$name"
    done
    probe() {   # name, then its arguments
        local name=$1; shift
        [ -x "/tmp/$name" ] || { echo "== $name: did not build"; return 1; }
        echo "== $name $*"
        "/tmp/$name" "$@" 2>&1 | tee -a "$OUT/probes.txt"
    }
    for t in 1 8 14; do for mode in 0 1 2 3; do probe fresh-fill 256 $t $mode; done; done
    probe register-fresh 256 8 16
    probe wc-probe 8
    probe down-slots 8
    probe batch-copy
    probe ipc-probe
    probe pinned-query
    probe capture-unsafe
    probe mailbox-floor 20
    probe lock-ways 3
    exit 0
fi

if [ "$what" = wheel ]; then
    repo=$PWD
    # Into a folder of its own on PYTHONPATH, beside the machine's numpy,
    # torch and CuPy (whose python3 may itself be a virtual environment's).
    site=/tmp/pygpu-wheel py=python3
    pip="python3 -m pip install -q --no-deps --no-index --target $site"
    $pip .wheels/pygpu-*manylinux*.whl || $pip .wheels/pygpu-*linux_x86_64.whl
    ls .wheels/apache_tvm_ffi-*.whl >/dev/null 2>&1 && $pip .wheels/apache_tvm_ffi-*.whl
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    cd /tmp
    $py -c "import pygpu; print('installed:', pygpu.__file__)"
    $py -m pygpu --no-bench 2>&1 | tee "$OUT/wheel-main.log"
    echo "== the kernels' first use in a fresh process (PTX compiled by the driver; then from its cache)"
    for run in 1 2; do
        $py - <<'PY'
import time, numpy as np, pygpu
x = pygpu.to_gpu(np.arange(1 << 20, dtype=np.float64).reshape(1024, 1024))
pygpu.synchronize() if hasattr(pygpu, "synchronize") else None
t = time.perf_counter(); y = x[::-1].copy(); y.get(); t1 = time.perf_counter() - t
t = time.perf_counter(); y = x.T.copy(order="C"); y.get(); t2 = time.perf_counter() - t
assert (y.get() == x.get().T).all()
print(f"first copy by kernel {t1 * 1e3:.1f} ms, next kernel {t2 * 1e3:.1f} ms; {pygpu.copy_kernels()}")
PY
    done
    echo "== python -m pygpu.bench, installed wheel"
    $py -m pygpu.bench --sizes 8 16M 64M 256M --peers --no-copies 2>/dev/null | tee "$OUT/wheel-bench.txt"
    $py -m pygpu.bench --copies 2>/dev/null | tee "$OUT/wheel-bench-copies.txt"
    echo "== tests against the installed wheel (PYGPU_BACKEND=cuda)"
    PYGPU_EXPECT_BACKENDS=host,cuda,hip PYGPU_EXPECT_CUDA_FROM=pypi timeout "${GPU_CHECK_TEST_S:-400}" \
        $py -m pytest -q -ra -p no:cacheprovider -c "$repo/pyproject.toml" --rootdir "$repo" "$repo/tests" 2>&1 \
        | tee "$OUT/wheel-tests.log" | tail -25
    exit 0
fi

if [ "$what" = marks ]; then
    rm -rf build pygpu/*.so
    CFLAGS=-DPYGPU_MARKS python3 setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 \
        || { tail -40 "$OUT/build.log"; exit 1; }
    IFS=';' read -ra marks_runs <<< "${GPU_CHECK_MARKS:---after 64K 256K 1M}"
    for args in "${marks_runs[@]}"; do      # (each a process of its own)
        echo "== call-marks.py $args"
        PYTHONPATH=$PWD python3 tools/research/call-marks.py $args 2>&1 | tee -a "$OUT/call-marks.txt"
    done
    rm -rf build pygpu/*.so     # (a marks build is for research only)
    for tree in . .ab-base; do
        [ -f "$tree/src/transfer/workers.c" ] || continue
        gcc -O2 -std=c11 -pthread -Isrc tools/research/workers-wake.c "$tree/src/transfer/workers.c" \
            -o /tmp/workers-wake && echo "== workers-wake ($tree's workers.c)" && /tmp/workers-wake 7 14
    done
    exit 0
fi

echo "== build"
rm -rf build pygpu/*.so
start=$(date +%s%N)
python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( ($(date +%s%N) - start) / 1000000 )) ms; built: $(ls pygpu/*.so | xargs -n1 basename | tr '\n' ' ')"
python3 - <<'PY'
import os, statistics, subprocess, sys
code = "import time, numpy; t = time.perf_counter(); import pygpu; print((time.perf_counter() - t) * 1e3)"
for label, forced in (("PYGPU_BACKEND=cuda", "cuda"), ("no PYGPU_BACKEND (probes the devices)", None)):
    env = dict(os.environ)
    env.pop("PYGPU_BACKEND", None)
    if forced:
        env["PYGPU_BACKEND"] = forced
    ms = [float(subprocess.check_output([sys.executable, "-c", code], env=env)) for _ in range(5)]
    print(f"import pygpu after numpy, {label}: median {statistics.median(ms):.1f} ms "
          f"(runs: {', '.join(f'{m:.1f}' for m in ms)})")
PY

ngpu=$(python3 -c "import pygpu; print(pygpu.device_count())")
devices() {
    echo "== between devices ($ngpu GPUs)"
    if [ "$ngpu" -ge 2 ]; then
        nvidia-smi topo -m 2>/dev/null | head -5
        python3 -m pygpu --no-bench 2>/dev/null | grep -A "$((ngpu * (ngpu - 1)))" '^peers'
        python3 -m pygpu.bench --devices 2>/dev/null | tee "$OUT/bench-devices.txt"
        echo "== a copy between devices, call by call (tools/research/peer-costs.py, in $OUT/peer-costs.txt)"
        PYTHONPATH=$PWD python3 tools/research/peer-costs.py >"$OUT/peer-costs.txt" 2>&1
        grep -E "pygpu|memcpyPeer \+" "$OUT/peer-costs.txt"
        echo "== which calls between devices a capture in global mode refuses (tools/research/capture-peer.c)"
        cuda=${CUDA_HOME:-/usr/local/cuda}
        gcc -O2 -I"$cuda/include" tools/research/capture-peer.c -L"$cuda/lib64" -lcudart -o /tmp/capture-peer \
            && { /tmp/capture-peer fresh global; /tmp/capture-peer calls; } 2>&1 | tee "$OUT/capture-peer.txt"
        echo "== MPI ping-pong, 2 ranks (python -m pygpu.bench_mpi)"
        mpi=(mpirun -np 2)
        mpirun --version 2>&1 | grep -q "Open MPI" && mpi+=(--oversubscribe --allow-run-as-root)
        "${mpi[@]}" python3 -m pygpu.bench_mpi 2>&1 | grep -v "^\[" | tee "$OUT/bench-mpi.txt"
        for round in 1 2; do
            for size in 64 256; do      # (registration off, then as built: on by default)
                python3 -c "import pygpu; from pygpu import bench_scale as b; n = $size << 20
print(b.registered_at_once(n, limit=0)); print(b.registered_at_once(n, limit=pygpu.transfer_config()['register_limit'] or 16 << 30))" \
                    2>/dev/null | tee -a "$OUT/bench-devices-at-once.txt"
            done
        done
        python3 -c "from pygpu import bench_scale as b; print('\n'.join(b.floors_lines(b.host_floors(), $ngpu)))" \
            2>/dev/null | tee -a "$OUT/bench-devices-at-once.txt"
    fi
}
if [ "$what" = ab ]; then
    echo "== python -m pygpu.bench (as built)"
    python3 -m pygpu.bench --sizes 8 16M 64M 256M --peers 2>/dev/null
    echo "== as built against each setting in GPU_CHECK_AB, interleaved (tools/research/ab-staging.py)"
    # (for example GPU_CHECK_AB="PYTHONPATH=$PWD/.ab-base" with an earlier commit unpacked there)
    python3 tools/research/ab-staging.py ${GPU_CHECK_AB:-AB_THREADS=8}
    echo "== timelines of the staged cases (tools/research/trace-cases.py 16M, in $OUT/traces.txt)"
    python3 tools/research/trace-cases.py 16M >"$OUT/traces.txt" 2>&1
    grep "^==" "$OUT/traces.txt"
    exit 0
fi
if [ "$what" = scale ]; then
    python3 -m pytest -q -ra tests/test_threads.py tests/test_transfers.py tests/test_background.py 2>&1 | tail -5
    for setting in ${GPU_CHECK_SCALE:-}; do          # (an earlier commit's worktree: built in place once)
        dir=${setting#PYTHONPATH=}
        if [ "$dir" != "$setting" ] && ! ls "$dir"/pygpu/_cuda*.so >/dev/null 2>&1; then
            (cd "$dir" && python3 setup.py -q build_ext --inplace >"$OUT/build-other.log" 2>&1) \
                || tail -20 "$OUT/build-other.log"
        fi
    done
    for round in 1 2; do
        echo "== bench --scale, as built (round $round)"
        python3 -m pygpu.bench --scale 2>/dev/null | tee "$OUT/scale-built-$round.txt"
        for setting in ${GPU_CHECK_SCALE:-}; do
            echo "== bench --scale, $setting (round $round)"
            here=$PWD       # (this checkout's bench_scale.py, run from $OUT against the other build)
            (cd "$OUT" && env "$setting" python3 -c "exec(open('$here/pygpu/bench_scale.py').read()); print(scale_report())") \
                2>&1 | tee -a "$OUT/scale-other-$round.txt"
        done
    done
    echo "== 8 threads: chunk and thread settings, interleaved (tools/research/threads-sweep.py)"
    python3 tools/research/threads-sweep.py 2>/dev/null | tee "$OUT/threads-sweep.txt"
    exit 0
fi
if [ "$what" = stress ]; then
    PYGPU_TEST_STRESS_S=${GPU_CHECK_STRESS_S:-90} python3 -m pytest -q -s -ra tests/test_stress.py 2>&1 \
        | tee "$OUT/tests-stress.log" | tail -8
    PYGPU_TEST_EXAMPLES=${GPU_CHECK_EXAMPLES:-300} python3 -m pytest -q -ra tests/test_fuzz.py \
        $(grep -l gpuarray_helpers tests/test_*.py) 2>&1 | tee "$OUT/tests-hunt.log" | tail -5
    exit 0
fi
if [ "$what" = slow ]; then
    echo "== tests (PYGPU_BACKEND=cuda), the long runs (marked slow)"
    python3 -m pytest -q -ra -m slow --durations=15 2>&1 | tee "$OUT/tests-slow.log" | tail -30
    exit 0
fi
if [ "$what" = copies ]; then
    python3 -m pygpu --no-bench 2>&1 | grep -i "device copies"
    python3 -m pytest -q -ra -m "slow or not slow" tests/test_device_copy.py tests/test_array_copy.py tests/test_c_units.py 2>&1 \
        | tee "$OUT/tests-copies.log" | tail -25
    python3 -m pygpu.bench --copies 2>/dev/null | tee "$OUT/bench-copies.txt"
    exit 0
fi
if [ "$what" = devices ]; then
    python3 -m pytest -q -ra tests/test_multi_device.py tests/test_mpi.py 2>&1 | tee "$OUT/tests-devices.log" | tail -15
    python3 -m pytest -q -ra tests/test_main.py -k "peers or bench_devices" 2>&1 | tee -a "$OUT/tests-devices.log" | tail -5
    devices
    python3 -m pytest -q benchmarks/test_devices.py --benchmark-columns=median,ops 2>&1 \
        | tee "$OUT/bench-devices-pytest.txt" | tail -25
    exit 0
fi

if [ "$what" != bench ]; then
    # (the long runs apart: with them the suite took more than the 10 minutes a call may run on 2 H200s)
    echo "== tests (PYGPU_BACKEND=cuda), the default run${PYGPU_REGISTER_LIMIT:+, PYGPU_REGISTER_LIMIT=$PYGPU_REGISTER_LIMIT}"
    # (a test that stalls prints every thread's stack after 120 s and, where pytest-timeout is
    # installed, as on the GPU machine, fails after 200 s: the rest of the suite still runs)
    stall=(-o faulthandler_timeout=120)
    python3 -c "import pytest_timeout" 2>/dev/null && stall+=(--timeout=200)
    [ "$what" = staged ] || python3 -m pytest -q -ra --durations=15 "${stall[@]}" 2>&1 | tee "$OUT/tests-cuda.log" \
        | grep -vE "^SKIPPED" | tail -40
    if [ "$what" = staged ] || [ "${GPU_CHECK_STAGED:-0}" = 1 ]; then   # (a 5-minute variant: asked for)
        echo "== tests (PYGPU_BACKEND=cuda, every pageable copy staged)"
        PYGPU_TEST_STAGING=1 python3 -m pytest -q -x "${stall[@]}" 2>&1 | tee "$OUT/tests-staged.log" | tail -3
    fi
    if [ "${GPU_CHECK_HOST:-0}" = 1 ]; then      # (CI runs the host suite anyway: asked for)
        echo "== tests (PYGPU_BACKEND=host)"
        PYGPU_BACKEND=host python3 -m pytest -q -ra 2>&1 | tee "$OUT/tests-host.log" | grep -E "^FAILED|passed|failed"
    fi
fi
if [ "$what" != bench ]; then
    echo "== a gated upload behind a pool block being page-locked (tools/research/warm-beside-gates.py; a hang: exit 124)"
    timeout 60 python3 tools/research/warm-beside-gates.py 4 2>/dev/null; echo "exit $?"
fi
[ "$what" = tests ] || [ "$what" = staged ] && exit 0

devices

echo "== main job"
python3 -m pygpu 2>&1 | tee "$OUT/main.log"

echo "== python -m pygpu.bench"
python3 -m pygpu.bench --plot "$OUT/bench.png" 2>/dev/null | tee "$OUT/pygpu-bench.txt"
echo "== python -m pygpu.bench --scale"
python3 -m pygpu.bench --scale 2>/dev/null | tee "$OUT/pygpu-bench-scale.txt"

echo "== benchmarks (pytest-benchmark)"
python3 -m pytest benchmarks -q --benchmark-columns=median,ops --benchmark-json="$OUT/bench.json" 2>&1 \
    | tee "$OUT/bench.log" | grep -E "passed|failed|error" 
python3 - "$OUT/bench.json" <<'PY' | tee "$OUT/bench-summary.txt"
import json, sys
data = json.load(open(sys.argv[1]))
for b in sorted(data["benchmarks"], key=lambda b: (b["group"] or "", b["name"])):
    extra = " ".join(f"{k}={v}" for k, v in b.get("extra_info", {}).items())
    print(f"{b['group'] or '':<28} {b['name']:<52} median {b['stats']['median'] * 1e6:>12.2f} us  {extra}")
PY
rm -f "$OUT/bench.json"
