#!/usr/bin/env bash
# The B+tree's figures: runs `millrace bench btree` (a sysbench-like mix of
# update_index, insert and point_select on a table of ROWS rows, a clustered
# and a secondary index) for each setting below, 3 times with the settings
# interleaved (A B C A B C A B C) so that drift of the disk or the machine
# hits every setting alike, and prints the medians and ratios as a markdown
# table. Raw JSON lines (one per run, with "case", "setting" and "rep" added)
# go to bench/results/btree-<timestamp>.jsonl.
#
#   a. the buffer pool larger than the data (512 MiB) vs 4x smaller than the
#      data (data_mb / 4 rounded up, at least 8 MiB; data_mb from the first
#      large-pool run), both at level 1: ops_per_s, p95_us, page_reads,
#      page_writes, ratio small/large.
#   b. the large-pool run at level 0 (no durability wait) vs level 1: ratio.
#   c. every run's ops_vs_baseline: the same mix on two BTreeMaps under a
#      mutex each, in memory, measured in the same run.
#
# Environment: ROWS (default 300000) rows loaded; SECONDS_PER_RUN (default
# 10) per run (the baseline runs as long again); THREADS (default 16); RUNS
# (default 3) per setting; BENCH_DIR (default bench/results) where the runs
# create their data directories: put it on the disk you want to measure.
#
# Exit status: 0 when every run finished, 1 when one failed or hung (the
# exact command is printed).

set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

ROWS=${ROWS:-300000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
THREADS=${THREADS:-16}
RUNS=${RUNS:-3}
BENCH_DIR=${BENCH_DIR:-bench/results}
LARGE_POOL_MB=512
MIN_SMALL_POOL_MB=8

# run_one CASE SETTING REP ARGS...: one run with --json (run_json in
# lib.sh); its line, labelled, is appended to $OUT and kept in $LINE.
# RUN_SECONDS overrides SECONDS_PER_RUN.
run_one() {
    local case_name=$1 setting=$2 rep=$3
    shift 3
    local seconds=${RUN_SECONDS:-$SECONDS_PER_RUN}
    local limit_s
    limit_s=$(hang_limit_s "$seconds" 2 "$ROWS" 1)
    run_json "$case_name" "$setting" "$rep" "$limit_s" "$BIN" bench btree --json --dir "$BENCH_DIR" \
        --rows "$ROWS" --threads "$THREADS" --seconds "$seconds" "$@"
}

# small_pool_mb JSON_LINE: a quarter of the line's data_mb, rounded up, at
# least MIN_SMALL_POOL_MB.
small_pool_mb() {
    python3 -c "import json, math, sys; print(max($MIN_SMALL_POOL_MB, math.ceil(json.loads(sys.argv[1])['data_mb'] / 4)))" "$1"
}

start_figures btree

SMALL_POOL_MB=""
for rep in $(seq "$RUNS"); do
    run_one a large "$rep" --buffer-pool-mb "$LARGE_POOL_MB" --level 1
    if [[ -z $SMALL_POOL_MB ]]; then
        if [[ -z $LINE ]]; then
            # The first large-pool run failed: size the data with a short run.
            RUN_SECONDS=1 run_one sizing large "$rep" --buffer-pool-mb "$LARGE_POOL_MB" --level 1 \
                --no-baseline
        fi
        if [[ -z $LINE ]]; then
            log "cannot size the data: no large-pool run finished"
            break
        fi
        SMALL_POOL_MB=$(small_pool_mb "$LINE")
        log "data from the first large-pool run: pool for case a's small setting $SMALL_POOL_MB MiB"
    fi
    run_one a small "$rep" --buffer-pool-mb "$SMALL_POOL_MB" --level 1
    run_one b level0 "$rep" --buffer-pool-mb "$LARGE_POOL_MB" --level 0
done

if [[ -s $OUT ]]; then
    figures_py "$OUT" "$ROWS" "$THREADS" "$SECONDS_PER_RUN" <<'EOF'
def pool(case, setting):
    return fmt(median(case, setting, "buffer_pool_mb"))

large = f"pool {pool('a', 'large')} MiB, level 1"
small = f"pool {pool('a', 'small')} MiB, level 1"
level0 = f"pool {pool('b', 'level0')} MiB, level 0"

row("a", large, "data_mb", median("a", "large", "data_mb"))
for key in ("ops_per_s", "p95_us", "page_reads", "page_writes"):
    l, s = median("a", "large", key), median("a", "small", key)
    row("a", small, key, s, f"{large}: {fmt(l)}", ratio_of(s, l))
for key in ("ops_per_s", "p95_us", "log_fsyncs"):
    l1, l0 = median("a", "large", key), median("b", "level0", key)
    row("b", level0, key, l0, f"{large}: {fmt(l1)}", ratio_of(l0, l1))
for case, setting, label in (("a", "large", large), ("a", "small", small), ("b", "level0", level0)):
    values = [r["ops_vs_baseline"] for r in runs.get((case, setting), [])]
    each = ", ".join("n/a" if v is None else f"{v:.3g}" for v in values)
    row("c", label, "ops_vs_baseline", median(case, setting, "ops_vs_baseline"),
        f"runs: {each}; baseline_ops_per_s = {fmt(median(case, setting, 'baseline_ops_per_s'))}",
        has_ratio=False)

n = max((len(v) for k, v in runs.items() if k[0] != "sizing"), default=0)
print()
print(f"rows={sys.argv[2]} threads={sys.argv[3]} seconds={sys.argv[4]}; "
      f"medians of {n} runs per setting; raw lines in {sys.argv[1]}")
print()
print_table("case", "setting", "median value", "comparison", "ratio")
EOF
fi

report_failures
