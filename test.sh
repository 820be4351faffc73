#!/usr/bin/env bash
# The one test command: installs what the tests need on a fresh Debian or
# Ubuntu machine (a C linker, the mariadb client and sysbench, which the
# server's tests run against `millrace serve`), then runs every test of the
# workspace. Arguments, if any, replace `--workspace`: `./test.sh -p millrace-sql`
# runs one crate's tests.
# Installs with apt-get as root, or through sudo when not root; on another
# system it says what to install and stops.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
command -v sysbench >/dev/null 2>&1 || missing+=(sysbench)
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
            echo "test.sh: the tests need ${missing[*]}; install them (as root) and run again" >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: the tests need ${missing[*]} (Debian package names); install them and run again" >&2
        exit 1
    fi
    echo "== installing ${missing[*]} (apt-get)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ $# -eq 0 ]; then set -- --workspace; fi
echo "== cargo test $*"
exec cargo test "$@"
