#!/usr/bin/env bash
# Build the host backend with AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer into a build folder of its own, and run the
# host test suite (or the pytest arguments given) against that build.
#
#   bash tools/asan.sh                          # build, then the whole host suite
#   bash tools/asan.sh tests/test_dlpack.py -x  # build, then these tests
#   ASAN_BUILD_ONLY=1 bash tools/asan.sh        # build only
#
# Settings (environment): CC (clang if there is one, else gcc), ASAN_BUILD
# (the build folder, default build/asan), JOBS (parallel compiles, default
# the number of CPUs).  The build is redone only when a source or header is
# newer than it.  Exit status: the build's, else pytest's; a sanitizer
# report fails the test that caused it (the process aborts, or exits with
# status 23 at its end for a leak).
#
# How it runs: Python itself is not built with ASan, so the ASan runtime is
# preloaded (LD_PRELOAD, into Python processes only), and PYTHONMALLOC=malloc sends Python's objects
# through malloc, where ASan sees use-after-free and overflows in them too
# and LeakSanitizer finds what they point to.  tools/lsan.supp lists the
# leaks that are CPython's and NumPy's own, not PyGPU's.  The folder holds
# pygpu/_host*.so and links to the rest of the package and the repository's
# files, so that the tests (and the fresh interpreters they start) import
# the sanitized build; the subprocesses inherit the settings.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# clang by default (clang 14's runtime is the one CI runs; gcc 12's works too
# with the setting below).
CC=${CC:-$(command -v clang >/dev/null && echo clang || echo gcc)}
BUILD=${ASAN_BUILD:-build/asan}
JOBS=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')   # (not a shim: it runs under ASan)

case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
read -r PYINC NPINC EXT < <("$PY" -c 'import sysconfig, numpy
print(sysconfig.get_paths()["include"], numpy.get_include(), sysconfig.get_config_var("EXT_SUFFIX"))')
SO=$BUILD/pygpu/_host$EXT
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=c11 -O1 -g -fPIC -Wall -Wextra $SAN -Isrc -Iinclude -I$PYINC -I$NPINC -DPYGPU_BACKEND_HOST=1 -DPYGPU_MODULE_NAME=_host"

# The ASan runtime this compiler links against, to preload.
if [ "$("$CC" --version | head -1 | grep -c clang)" = 1 ]; then
    RUNTIME=$("$CC" -print-file-name=libclang_rt.asan-x86_64.so)
else
    RUNTIME=$("$CC" -print-file-name=libasan.so)
fi
if [ ! -e "$RUNTIME" ] || ! echo 'int main(void){return 0;}' | "$CC" $SAN -x c - -o /dev/null 2>/dev/null; then
    echo "asan.sh: $CC cannot build with -fsanitize=address,undefined (no ASan runtime)" >&2
    exit 77
fi

build() {
    mkdir -p "$BUILD/obj" "$BUILD/pygpu"
    local srcs=(src/*.c src/copy/*.c src/transfer/*.c src/backend/rt_host.c src/backend/ipc_host.c src/backend/locked_host.c src/backend/captured_host.c src/backend/events_host.c src/backend/peer_host.c src/backend/kernels_host.c) stale=0
    if [ -e "$SO" ]; then
        for f in "${srcs[@]}" src/*.h src/copy/*.h src/transfer/*.h src/backend/*.h src/kernels/*.h include/pygpu/*.h tools/asan.sh; do
            [ "$f" -nt "$SO" ] && stale=1 && break
        done
    else
        stale=1
    fi
    if [ "$stale" = 1 ]; then
        export ASAN_CC="$CC" ASAN_CFLAGS="$CFLAGS" ASAN_OBJ="$BUILD/obj"
        rm -f "$BUILD"/obj/*.o      # (a file moved or gone leaves no object behind to link)
        printf '%s\n' "${srcs[@]}" | xargs -P "$JOBS" -n 1 sh -c \
            '$ASAN_CC $ASAN_CFLAGS -c "$1" -o "$ASAN_OBJ/$(echo "$1" | tr / _).o" || exit 255' sh
        "$CC" -shared $SAN -o "$SO" "$BUILD"/obj/*.o -lpthread
    fi
    # The rest of the package and of the repository, linked (tests find
    # README.md, pyproject.toml, the sources and the headers beside the
    # package; relative test paths name the same files).
    for f in pygpu/*.py pygpu/*.pyi pygpu/py.typed; do
        ln -sfn "$ROOT/$f" "$BUILD/pygpu/$(basename "$f")"
    done
    for f in PyGPU.py README.md pyproject.toml setup.py build_support src include docs examples tools tests; do
        ln -sfn "$ROOT/$f" "$BUILD/$f"
    done
    # Only Python runs with the ASan runtime preloaded: a wrapper preloads
    # it, and the interpreter hides it from the programs it starts (the C
    # compiler of test_capi, shells) and starts Python through the wrapper.
    printf '#!/bin/sh\nLD_PRELOAD=%s${LD_PRELOAD:+:$LD_PRELOAD} exec %s "$@"\n' "$RUNTIME" "$PY" >"$BUILD/python"
    chmod +x "$BUILD/python"
    cat >"$BUILD/sitecustomize.py" <<EOF
# Made by tools/asan.sh for the sanitized build in this folder.
import os, sys
os.environ["LD_PRELOAD"] = ":".join(p for p in os.environ.get("LD_PRELOAD", "").split(":") if p and p != "$RUNTIME")
sys.executable = "$BUILD/python"
EOF
}

build
[ -n "${ASAN_BUILD_ONLY:-}" ] && exit 0

export PYTHONMALLOC=malloc
# intercept_tls_get_addr=0: these runtimes (gcc 12's, clang 14's) take a
# thread's block of dynamic TLS (PyGPU's thread-local variables, in a
# dlopen'ed library) that happens to begin 16 bytes past a page boundary for
# a glibc-2.19 allocation with a header, read a start and length from the 16
# bytes before it (the allocator's own header), and LeakSanitizer's check at
# exit then scans that bogus range and dies ("Tracer caught signal 11",
# "LeakSanitizer has encountered a fatal error"), at random, as the heap
# happens to lie.  glibc 2.25 and later allocate those blocks with malloc,
# so without the interception they are heap blocks that LeakSanitizer
# reaches from the thread's descriptor like any other.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:allocator_may_return_null=1:intercept_tls_get_addr=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tools/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export PYGPU_BACKEND=host
# The host backend's pool of freed blocks would hand a freed block to the
# next allocation, where ASan could not see a use after free: off here
# (tests that start interpreters of their own with a clean environment
# still have it).
export PYGPU_HOST_POOL=${PYGPU_HOST_POOL:-0}
export PYTHONPATH=$BUILD${PYTHONPATH:+:$PYTHONPATH}
cd "$BUILD"
if [ $# -eq 0 ]; then
    set -- tests
fi
exec "$BUILD/python" -m pytest -p no:cacheprovider "$@"
