#!/usr/bin/env bash
# tests/run.sh: install what is missing, configure, build (-Wall -Wextra -Werror) and run the
# CI test set (ctest labels unit, raft, sim, integration, chaos, build; bench is left out), then
# the short fuzz runs (label fuzz: the fuzz preset, clang, build/fuzz; docs/testing.md).
#
#   tests/run.sh [--asan] [--build-dir DIR] [--jobs N] [--label REGEX] [--no-install]
#
#   --asan          use the asan preset (ASan + UBSan, build/asan) instead of release
#   --build-dir DIR configure a plain build tree in DIR (e.g. build/ci) instead of a preset's
#   --jobs N        parallel tests (default 2)
#   --label REGEX   ctest label regex (default 'unit|raft|sim|integration|chaos|build|fuzz');
#                   the fuzz step runs when 'fuzz' matches it
#   --no-install    never call apt-get (also KQ_NO_INSTALL=1)
#
# Runs from any directory, without a terminal and as root (CI calls it through .ci/run).
# Exit status: 0 when every selected test passed, non-zero otherwise. The last line is a
# one-line summary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PRESET=release
BUILD_DIR=""
JOBS=2
LABELS='unit|raft|sim|integration|chaos|build|fuzz'
NO_INSTALL=${KQ_NO_INSTALL:-0}
# Build and test dependencies (Debian 12 package names).
PACKAGES=(cmake ninja-build gcc libc6-dev pkgconf libprotobuf-c-dev protobuf-c-compiler
    libnng-dev libmbedtls-dev liblmdb-dev libcmocka-dev openssl python3 iproute2 iptables procps
    coreutils clang libclang-rt-14-dev)

while [[ $# -gt 0 ]]; do
    case $1 in
    --asan) PRESET=asan && shift ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a directory} && shift 2 ;;
    --jobs | -j) JOBS=${2:?--jobs needs a number} && shift 2 ;;
    --label | -L) LABELS=${2:?--label needs a regex} && shift 2 ;;
    --no-install) NO_INSTALL=1 && shift ;;
    -h | --help)
        sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "tests/run.sh: unknown option '$1' (see --help)" >&2
        exit 2
        ;;
    esac
done

START=$(date +%s)
say() { printf 'tests/run.sh: %s\n' "$*"; }
summary() { # STATUS DETAIL
    say "$1: $2 (preset ${PRESET}${BUILD_DIR:+, build dir $BUILD_DIR}, $(($(date +%s) - START)) s)"
}

ensure_packages() {
    local missing=() p sudo=()
    command -v dpkg-query >/dev/null || {
        say "not a Debian system: make sure these are installed: ${PACKAGES[*]}"
        return 0
    }
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ $NO_INSTALL == 1 ]]; then
        say "missing packages: ${missing[*]} (not installing: --no-install)"
        return 1
    fi
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || {
            say "missing packages ${missing[*]} and no sudo: install them as root"
            return 1
        }
        sudo=(sudo)
    fi
    say "installing missing packages: ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" </dev/null
}

cd "$ROOT"
if ! ensure_packages; then
    summary FAIL "dependencies missing"
    exit 1
fi

# Configure and build with warnings as errors (KQ_WERROR: the presets set it, and so does a
# --build-dir tree).
if [[ -n $BUILD_DIR ]]; then
    [[ $BUILD_DIR == /* ]] || BUILD_DIR=$ROOT/$BUILD_DIR
    san=OFF
    type=RelWithDebInfo
    if [[ $PRESET == asan ]]; then
        san=ON
        type=Debug
    fi
    cfg=(cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "-DCMAKE_BUILD_TYPE=$type" "-DKQ_SANITIZE=$san"
        -DKQ_WERROR=ON -DBUILD_TESTING=ON)
    build=(cmake --build "$BUILD_DIR")
    test_dir=(--test-dir "$BUILD_DIR")
else
    BUILD_DIR=$ROOT/build/$PRESET
    cfg=(cmake --preset "$PRESET" -DBUILD_TESTING=ON)
    build=(cmake --build --preset "$PRESET")
    test_dir=(--preset "$PRESET")
fi

# Sanitizer settings for the asan preset also reach the daemons the integration tests start.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The main build and tests run unless the label regex is exactly 'fuzz' (ctest searches with
# it, so '--label int' selects the integration tests); no test selected is a failure.
rc=0
line=""
main=1
[[ $LABELS == fuzz ]] && main=0
if [[ $main == 0 ]]; then
    line="only the fuzz label selected"
    PRESET=fuzz
    BUILD_DIR=$ROOT/build/fuzz
else
    say "configuring: ${cfg[*]}"
    if ! "${cfg[@]}"; then
        summary FAIL "configure failed"
        exit 1
    fi
    say "building: ${build[*]}"
    if ! "${build[@]}"; then
        summary FAIL "build failed"
        exit 1
    fi
    log=$BUILD_DIR/ctest-run.log
    say "testing: ctest ${test_dir[*]} -j$JOBS -L '$LABELS' -LE bench"
    # pipefail: rc is ctest's status (tee does not fail).
    ctest "${test_dir[@]}" --output-on-failure --no-tests=error -j"$JOBS" -L "$LABELS" -LE bench \
        </dev/null 2>&1 | tee "$log" || rc=$?
    line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1 || true)
fi

# Fuzzing: every libFuzzer target for KQ_FUZZ_SECONDS (10) from the checked-in seed corpus,
# in its own clang build tree (the fuzz preset, build/fuzz), when 'fuzz' is a selected label.
fuzz_rc=0
fuzz_line=""
if [[ fuzz =~ $LABELS ]]; then # the same search ctest does
    if ! command -v clang >/dev/null; then
        fuzz_line="fuzz skipped (no clang)"
        say "$fuzz_line"
    else
        fuzz_start=$(date +%s)
        fuzz_log=$ROOT/build/fuzz/ctest-run.log
        say "fuzzing: cmake --preset fuzz && cmake --build --preset fuzz && ctest --preset fuzz"
        if ! cmake --preset fuzz -DBUILD_TESTING=ON; then
            fuzz_rc=1
            fuzz_line="fuzz configure failed"
        elif ! cmake --build --preset fuzz; then
            fuzz_rc=1
            fuzz_line="fuzz build failed"
        else
            ctest --preset fuzz --output-on-failure --no-tests=error -j"$JOBS" </dev/null 2>&1 |
                tee "$fuzz_log" || fuzz_rc=$?
            fuzz_line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$fuzz_log" |
                tail -n 1 || true)
            fuzz_line="fuzz: ${fuzz_line:-ctest exited with status $fuzz_rc}"
        fi
        fuzz_line="$fuzz_line ($(($(date +%s) - fuzz_start)) s)"
        say "$fuzz_line"
    fi
fi

if [[ $rc -eq 0 && $fuzz_rc -eq 0 ]]; then
    summary PASS "${line:-ctest passed}${fuzz_line:+; $fuzz_line}"
else
    summary FAIL "${line:-ctest exited with status $rc}${fuzz_line:+; $fuzz_line}"
    [[ $rc -ne 0 ]] || rc=$fuzz_rc
fi
exit "$rc"
