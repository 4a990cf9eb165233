#!/usr/bin/env bash
# Run tests many times while every core is kept busy, to find tests that can
# fail by timing (a timer armed outside its `with pytest.raises`, a sleep
# taken as a deadline, ticks counted on a loaded machine).
#   bash tools/timing-stress.sh [RUNS] [pytest arguments...]
# Default: 20 runs of the tests marked `timing` (those that arm timers,
# interrupt transfers, sleep, count ticks or race threads: `-m timing` over
# the test files that use the mark).  HOGS=N busy loops (default: one a
# core, `nproc`).  Prints one line a run, then each test that failed and in
# how many runs; exits 1 if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
shift || true
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    mapfile -t files < <(grep -l "pytest.mark.timing" tests/*.py)
    args=(-m timing "${files[@]}")
fi
failures=$(mktemp)
hogs=()
trap 'kill "${hogs[@]}" 2>/dev/null; rm -f "$failures"' EXIT
for _ in $(seq "${HOGS:-$(nproc)}"); do
    (while :; do :; done) &
    hogs+=($!)
done
failed=0
for r in $(seq "$runs"); do
    start=$SECONDS
    out=$(PYGPU_BACKEND=${PYGPU_BACKEND:-host} timeout 900 python3 -m pytest -q -rfE -p no:cacheprovider "${args[@]}" 2>&1)
    rc=$?
    echo "run $r: rc=$rc in $((SECONDS - start)) s: $(echo "$out" | tail -1)"
    if [ $rc -ne 0 ]; then
        failed=$((failed + 1))
        # (the short summary's lines; a run killed by the timeout has none)
        echo "$out" | grep -E "^(FAILED|ERROR) " | cut -c1-300
        echo "$out" | grep -E "^(FAILED|ERROR) " | sed 's/ - .*//' >> "$failures"
        [ $rc -eq 124 ] && echo "TIMEOUT run $r (900 s)" | tee -a "$failures"
        echo "$out" | grep -E "Interrupt" | head -3
    fi
done
echo "$failed of $runs runs failed under ${HOGS:-$(nproc)} busy loops on $(nproc) cores"
if [ -s "$failures" ]; then
    echo "failures per test (runs):"
    sort "$failures" | uniq -c | sort -rn
fi
[ "$failed" -eq 0 ]
