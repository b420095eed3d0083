#!/usr/bin/env bash
# build_units_match_install: every shipped systemd unit's ExecStart runs a program that
# `cmake --install` actually installs (issue 8, item 14: the unit ran /usr/sbin/kq-controller
# while the install put it in bin).
# Usage: test_units_run_what_install_installs.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR BUILD_DIR}
build=${2:?usage: $0 SOURCE_DIR BUILD_DIR}
dest=$(mktemp -d /tmp/kq-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
fails=0
checks=0
if ! DESTDIR=$dest cmake --install "$build" --prefix /usr/local >"$dest.log" 2>&1; then
    cat "$dest.log"
    echo "FAIL: cmake --install failed"
    exit 1
fi
rm -f "$dest.log"
for unit in "$src"/deploy/systemd/*.service; do
    while read -r line; do
        prog=${line#ExecStart=}
        prog=${prog%% *}
        checks=$((checks + 1))
        if [[ -x $dest$prog ]]; then
            echo "ok: $(basename "$unit"): $prog is installed"
        else
            echo "FAIL: $(basename "$unit") runs $prog, which cmake --install (prefix /usr/local) does not install; it installs: $(cd "$dest" && find . -type f -perm -u+x | sed 's/^\.//' | tr '\n' ' ')"
            fails=$((fails + 1))
        fi
    done < <(grep -E '^ExecStart=' "$unit")
done
[[ $checks -gt 0 ]] || { echo "FAIL: no ExecStart line in deploy/systemd"; exit 1; }
echo "$((checks - fails)) passed, $fails failed"
[[ $fails -eq 0 ]]
