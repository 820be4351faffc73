#!/usr/bin/env bash
# The transaction layer's figures: runs `millrace bench trx` (sysbench-like
# transactions on a table of ROWS rows with a secondary index, each
# operation one transaction) for each setting below, 3 times with the
# settings interleaved (A B C D E A B C D E ...) so that drift of the disk or
# the machine hits every setting alike, and prints the medians and ratios as
# a markdown table. Raw JSON lines (one per run, with "case", "setting" and
# "rep" added) go to bench/results/trx-<timestamp>.jsonl, each run's time
# series (one CSV row a second) next to them as
# trx-<timestamp>-<case>-<setting>-<rep>.csv.
#
#   a. update_index and insert at level 1: commits_per_s, p95_us, and
#      commits_vs_baseline: the same operation on a bare B+tree table (no
#      undo, locks or read views), measured in the same run.
#   b. update_index with --long-reader (a read view open for the whole run)
#      vs without (case a's run): history_len_max, commits_per_s, ratio.
#   c. update_index with --long-reader and --undo-quota-mb QUOTA_MB, for each
#      --undo-quota-policy (rollback_oldest, wait_writers):
#      long_reader_rolled_back, history_len_max, commits_per_s, ratio to
#      case b's long-reader run without a quota.
#   d. seed 002 re-run: one update_index run of 3 x SECONDS_PER_RUN seconds
#      at level 1, switched to level 2 after SECONDS_PER_RUN and back to 1
#      after 2 x SECONDS_PER_RUN, with its time series in
#      bench/results/seed002-<timestamp>.csv: per phase, the median
#      commits_per_s and history_len of the CSV rows, and history_len at the
#      phase's end.
#
# Environment: ROWS (default 100000) rows loaded; SECONDS_PER_RUN (default
# 10) per run (case a's baseline runs as long again; cases b and c skip it);
# THREADS (default 16); RUNS (default 3) per setting; QUOTA_MB (default 8)
# for case c; BENCH_DIR (default bench/results) where the runs create their
# data directories: put it on the disk you want to measure.
#
# Exit status: 0 when every run finished, 1 when one failed or hung (the
# exact command is printed; a hung run's thread stacks go to the stderr log
# if gdb is installed).

set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROWS=${ROWS:-100000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
THREADS=${THREADS:-16}
RUNS=${RUNS:-3}
QUOTA_MB=${QUOTA_MB:-8}
BENCH_DIR=${BENCH_DIR:-bench/results}
GDB_ON_HANG=1

# run_one CASE SETTING REP ARGS...: one run with --json (run_json in
# lib.sh) and a time series; its line, labelled, is appended to $OUT and
# kept in $LINE. RUN_SECONDS overrides SECONDS_PER_RUN, CSV the time
# series' path.
run_one() {
    local case_name=$1 setting=$2 rep=$3
    shift 3
    local seconds=${RUN_SECONDS:-$SECONDS_PER_RUN}
    local csv=${CSV:-"${OUT%.jsonl}-$case_name-$setting-$rep.csv"}
    local limit_s
    limit_s=$(hang_limit_s "$seconds" 2 "$ROWS" 2)
    run_json "$case_name" "$setting" "$rep" "$limit_s" "$BIN" bench trx --json --dir "$BENCH_DIR" \
        --rows "$ROWS" --threads "$THREADS" --seconds "$seconds" --timeseries "$csv" "$@"
}

start_figures trx
SEED002_CSV="$RESULTS/seed002-$STAMP.csv"

for rep in $(seq "$RUNS"); do
    run_one a update_index "$rep" --workload update_index --level 1
    run_one a insert "$rep" --workload insert --level 1
    run_one b long_reader "$rep" --workload update_index --level 1 --long-reader --no-baseline
    for policy in rollback_oldest wait_writers; do
        run_one c "$policy" "$rep" --workload update_index --level 1 --long-reader \
            --undo-quota-mb "$QUOTA_MB" --undo-quota-policy "$policy" --no-baseline
    done
done

S=$SECONDS_PER_RUN
RUN_SECONDS=$((3 * S)) CSV=$SEED002_CSV run_one d seed002 1 --workload update_index --level 1 \
    --set-level-at "$S:2" --set-level-at "$((2 * S)):1" --no-baseline

if [[ -s $OUT ]]; then
    figures_py "$OUT" "$ROWS" "$THREADS" "$SECONDS_PER_RUN" "$QUOTA_MB" "$SEED002_CSV" <<'EOF'
import csv, os

out, rows_n, threads, seconds, quota_mb, seed_csv = sys.argv[1:7]
seconds = float(seconds)

for workload in ("update_index", "insert"):
    label = f"{workload}, level 1"
    values = [r["commits_vs_baseline"] for r in runs.get(("a", workload), [])]
    each = ", ".join("n/a" if v is None else f"{v:.3g}" for v in values)
    row("a", label, "commits_per_s", median("a", workload, "commits_per_s"),
        f"bare B+tree: baseline_ops_per_s = {fmt(median('a', workload, 'baseline_ops_per_s'))} "
        f"(commits_vs_baseline runs: {each})",
        median("a", workload, "commits_vs_baseline"))
    row("a", label, "p95_us", median("a", workload, "p95_us"))

plain = "update_index, level 1"
long = "update_index + long reader"
for key in ("history_len_max", "undo_mb_max", "commits_per_s", "p95_us"):
    w, wo = median("b", "long_reader", key), median("a", "update_index", key)
    row("b", long, key, w, f"{plain}: {fmt(wo)}", ratio_of(w, wo))

for policy in ("rollback_oldest", "wait_writers"):
    label = f"{long}, undo quota {quota_mb} MiB, {policy}"
    rs = runs.get(("c", policy), [])
    rolled = sum(1 for r in rs if r.get("long_reader_rolled_back"))
    at = ", ".join(fmt(r["long_reader_rolled_back_at_s"]) for r in rs
                   if r.get("long_reader_rolled_back_at_s") is not None)
    row("c", label, "", f"long_reader_rolled_back in {rolled} of {len(rs)} runs"
        + (f" (found at {at} s)" if at else ""))
    for key in ("history_len_max", "undo_mb_max", "commits_per_s", "p95_us", "lock_timeouts"):
        v, nq = median("c", policy, key), median("b", "long_reader", key)
        row("c", label, key, v, f"no quota: {fmt(nq)}", ratio_of(v, nq))

n = max((len(v) for k, v in runs.items() if k[0] != "d"), default=0)
print()
print(f"rows={rows_n} threads={threads} seconds={fmt(seconds)}; medians of {n} runs per "
      f"setting; raw lines in {out}, time series next to them")
print()
print_table("case", "setting", "median value", "comparison", "ratio")

print()
if not os.path.exists(seed_csv) or ("d", "seed002") not in runs:
    print(f"case d (seed 002): no result (see the failures below); CSV: {seed_csv}")
    sys.exit(0)
with open(seed_csv) as f:
    series = list(csv.DictReader(f))
# A row covers the second before t_s: its phase is that of its midpoint.
phases = [[], [], []]
for r in series:
    phases[min(2, max(0, int((float(r["t_s"]) - 0.5) // seconds)))].append(r)
d = runs[("d", "seed002")][0]
print(f"case d (seed 002): update_index, level 1 -> 2 at {fmt(seconds)} s -> 1 at "
      f"{fmt(2 * seconds)} s; one run; CSV: {seed_csv}")
print(f"whole run: commits_per_s = {fmt(d['commits_per_s'])}, history_len_max = "
      f"{d['history_len_max']}, history_len_end = {d['history_len_end']}, "
      f"purge_records = {d['purge_records']}")
print()
print("| phase | seconds | level | rows | median commits_per_s | median history_len | "
      "history_len at the end | median p99_ms |")
print("|---|---|---|---|---|---|---|---|")
for i, phase in enumerate(phases):
    span = f"{fmt(i * seconds)}-{fmt((i + 1) * seconds)}"
    if not phase:
        print(f"| {i + 1} | {span} | n/a | 0 | n/a | n/a | n/a | n/a |")
        continue
    levels = "/".join(sorted({r["level"] for r in phase}))
    cps = statistics.median(float(r["commits_per_s"]) for r in phase)
    hl = statistics.median(int(r["history_len"]) for r in phase)
    p99 = [float(r["p99_ms"]) for r in phase if r["p99_ms"]]
    p99 = fmt(statistics.median(p99)) if p99 else "n/a"
    print(f"| {i + 1} | {span} | {levels} | {len(phase)} | {fmt(cps)} | {fmt(hl)} | "
          f"{phase[-1]['history_len']} | {p99} |")
EOF
fi

report_failures
