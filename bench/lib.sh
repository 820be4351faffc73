# shellcheck shell=bash
# shellcheck disable=SC2034 # BIN, STAMP, LINE...: set here for the scripts that source this

# Shared by the scripts in bench/, which source it right after
# `set -euo pipefail`:
#
#   set -euo pipefail
#   # shellcheck source=bench/lib.sh
#   source "$(dirname "$0")/lib.sh"
#
# Sourcing it moves to the repository root and sets BIN and RESULTS. For all
# scripts: log, build_millrace. For the *_figures.sh scripts: start_figures,
# hang_limit_s, run_json, report_failures and figures_py (their Python tables'
# common part).

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

BIN=target/release/millrace
RESULTS=bench/results
# A run that takes this much longer than its timed phases is treated as a
# hang; a load gets one more second per LOAD_ROWS_PER_S rows on top.
HANG_MARGIN_S=60
LOAD_ROWS_PER_S=5000
# 1: a hung run's thread stacks go to $ERRLOG (with gdb) before it is killed;
# the run is then watched every second instead of run under timeout(1).
GDB_ON_HANG=0

log() { printf '%s\n' "$*" >&2; }

# build_millrace [--quiet]: builds $BIN. Without --quiet, a "building" line
# and cargo's output go to stderr; with it, cargo's output shows only when
# the build fails (it runs again to show why).
build_millrace() {
    if [[ ${1:-} == --quiet ]]; then
        cargo build --release -p millrace >/dev/null 2>&1 || cargo build --release -p millrace
    else
        log "building"
        cargo build --release -p millrace >&2
    fi
}

# start_figures NAME: creates $RESULTS and $BENCH_DIR, sets STAMP, OUT
# ($RESULTS/NAME-STAMP.jsonl: one labelled JSON line per run), ERRLOG (the
# runs' stderr) and FAILURES (empty), builds $BIN and says where the results
# go.
start_figures() {
    mkdir -p "$RESULTS" "$BENCH_DIR"
    STAMP=$(date +%Y%m%d-%H%M%S)
    OUT="$RESULTS/$1-$STAMP.jsonl"
    ERRLOG="${OUT%.jsonl}.stderr.log"
    FAILURES=()
    build_millrace
    log "results: $OUT"
}

# hang_limit_s SECONDS TIMED_PHASES [ROWS LOADS]: the seconds after which a
# run of TIMED_PHASES phases of SECONDS each (and LOADS loads of ROWS rows)
# counts as hung.
hang_limit_s() {
    python3 -c "import math,sys; print(int(sys.argv[2]) * math.ceil(float(sys.argv[1])) + 2 + $HANG_MARGIN_S + int(sys.argv[4]) * int(sys.argv[3]) // $LOAD_ROWS_PER_S)" \
        "$1" "$2" "${3:-0}" "${4:-0}"
}

# run_json CASE SETTING REP LIMIT_S CMD...: runs CMD, a bench with --json,
# for at most LIMIT_S seconds. Its line, labelled with "case", "setting" and
# "rep", is appended to $OUT and kept in $LINE; if it hangs or fails, LINE
# is empty and the exact command goes to FAILURES.
run_json() {
    local case_name=$1 setting=$2 rep=$3 limit_s=$4
    shift 4
    log "case $case_name, $setting, run $rep: $(printf '%q ' "$@")"
    LINE=""
    local line rc=0 hung=0
    if ((GDB_ON_HANG)); then
        local stdout started=$SECONDS
        stdout=$(mktemp)
        "$@" >"$stdout" 2>>"$ERRLOG" &
        local pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            if ((SECONDS - started >= limit_s)); then
                hung=1
                if command -v gdb >/dev/null; then
                    log "  no result after ${limit_s} s: thread stacks to $ERRLOG"
                    gdb -p "$pid" -batch -ex "thread apply all bt 8" >>"$ERRLOG" 2>&1 || true
                fi
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 1
        done
        wait "$pid" || rc=$?
        line=$(cat "$stdout")
        rm -f "$stdout"
    else
        line=$(timeout -k 10 "$limit_s" "$@" 2>>"$ERRLOG") || rc=$?
        if ((rc == 124 || rc == 137)); then
            hung=1
        fi
    fi
    if ((hung)); then
        FAILURES+=("HANG (no result after ${limit_s} s): $(printf '%q ' "$@")")
        log "  hung, killed"
        return
    fi
    if ((rc != 0)) || [[ $line != \{* ]]; then
        FAILURES+=("FAILED (exit $rc, see $ERRLOG): $(printf '%q ' "$@")")
        log "  failed with exit status $rc"
        return
    fi
    LINE=$line
    printf '{"case":"%s","setting":"%s","rep":%d,%s\n' "$case_name" "$setting" "$rep" "${line#\{}" >>"$OUT"
}

# report_failures: if a run failed or hung, lists their commands and exits 1.
report_failures() {
    if ((${#FAILURES[@]} > 0)); then
        local f
        log ""
        log "runs that did not finish:"
        for f in "${FAILURES[@]}"; do log "  $f"; done
        exit 1
    fi
}

# figures_py ARGS... <<'EOF' PYTHON EOF: runs PYTHON after FIGURES_PY below,
# with ARGS as sys.argv[1:]; the first is the JSON lines ($OUT).
figures_py() {
    local body
    body=$(cat)
    python3 -c "$FIGURES_PY
$body" "$@"
}

# Imports json, statistics and sys; runs: the runs by (case, setting);
# median(case, setting, key) of the runs that have key; fmt(value);
# ratio_of(a, b); rows, row() for a table with the columns case | setting |
# median value | comparison | ratio (log_figures.sh defines its own row()
# with a goal column) and print_table(*columns) to print it.
FIGURES_PY=$(
    cat <<'EOF'
import json, statistics, sys

runs = {}
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        runs.setdefault((r["case"], r["setting"]), []).append(r)

def median(case, setting, key):
    values = [r[key] for r in runs.get((case, setting), []) if r.get(key) is not None]
    return statistics.median(values) if values else None

def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{v:.0f}"

def ratio_of(a, b):
    return a / b if a is not None and b else None

rows = []

def row(case, setting, key, value, comparison="", ratio=None, has_ratio=True):
    ratio_cell = "n/a" if ratio is None else f"{ratio:.3g}x"
    value_cell = value if isinstance(value, str) else f"{key} = {fmt(value)}"
    rows.append((case, setting, value_cell, comparison,
                 ratio_cell if comparison and has_ratio else ""))

def print_table(*columns):
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print("| " + " | ".join(r) + " |")
EOF
)
