#!/usr/bin/env bash
# build_plain_release: the README's plain build works for everyone who builds, not just CI.
#  1. a plain configure (no preset, no options) does not turn warnings into errors;
#  2. a Release build (-O3, where gcc 12 sees more, e.g. -Warray-bounds) is warning-free, so the
#     presets' and CI's KQ_WERROR=ON cannot fail where a plain build works.
# Usage: test_plain_release_build.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: test_plain_release_build.sh SOURCE_DIR}
work=$(mktemp -d /tmp/kq-plain-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

cmake -S "$src" -B "$work/plain" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$work/plain.log" 2>&1 || {
    cat "$work/plain.log"
    echo "FAIL: plain configure failed"
    exit 1
}
if grep -q 'KQ_WERROR:BOOL=ON' "$work/plain/CMakeCache.txt"; then
    echo "FAIL: a plain configure turns on KQ_WERROR (warnings as errors are for CI and the presets)"
    exit 1
fi
if grep -rq -- '-Werror' "$work/plain/build.ninja" "$work/plain/CMakeFiles" 2>/dev/null; then
    echo "FAIL: a plain configure passes -Werror to the compiler"
    exit 1
fi
echo "ok: a plain configure leaves warnings as warnings"

# Build the plain Release tree and require zero warnings (what KQ_WERROR=ON would have refused).
if ! cmake --build "$work/plain" >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    echo "FAIL: plain Release build failed"
    exit 1
fi
if grep -E 'warning:' "$work/build.log"; then
    echo "FAIL: the Release build warns (CI builds with -Werror)"
    exit 1
fi
echo "ok: plain Release build, no warnings"
echo "1 passed, 0 failed"
