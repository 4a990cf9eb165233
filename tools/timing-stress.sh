#!/usr/bin/env bash
# Run tests many times while every core is kept busy, to find tests that can
# fail by timing (a timer armed outside its `with pytest.raises`, a sleep
# taken as a deadline, ticks counted on a loaded machine).
#   bash tools/timing-stress.sh [RUNS] [pytest arguments...]
# Default: 20 runs of the tests that arm timers, interrupt transfers, count
# ticks or race threads.  Prints one line a run and the failures at the end;
# exits 1 if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(tests/test_faults.py tests/test_transfers.py tests/test_threads.py
                               tests/test_background.py -k "interrupt or gil or tick or thread or signal")
hogs=()
for _ in $(seq "$(nproc)"); do
    (while :; do :; done) &
    hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
failed=0
for r in $(seq "$runs"); do
    out=$(PYGPU_BACKEND=${PYGPU_BACKEND:-host} timeout 900 python3 -m pytest -q -p no:cacheprovider "${args[@]}" 2>&1)
    rc=$?
    echo "run $r: rc=$rc $(echo "$out" | tail -1)"
    if [ $rc -ne 0 ]; then
        failed=$((failed + 1))
        echo "$out" | grep -E "^(FAILED|ERROR)|Interrupt" | head -5
    fi
done
echo "$failed of $runs runs failed under $(nproc) busy loops"
[ "$failed" -eq 0 ]
