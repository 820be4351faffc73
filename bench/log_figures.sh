#!/usr/bin/env bash
# The redo log's figures: runs `millrace bench log` for each case below,
# 3 times with the settings interleaved (A B A B A B) so that drift of the
# disk or the machine hits both settings alike, and prints the medians, the
# ratios and the goals as a markdown table. Raw JSON lines (one per run, with
# "case", "setting" and "rep" added) go to bench/results/log-<timestamp>.jsonl.
#
#   a. 1 thread, level 1: commit p50 vs a bare pwrite + fdatasync (<= 1.3x),
#      --log-writer-threads off and on.
#   b. 64 threads, level 1: commits per fsync (>= 20), and commits/s vs the
#      1-thread run of case a (>= 10x), off and on.
#   c. seed 000: 64 threads in a cgroup v1 quota of 0.9 CPU, dedicated writer
#      threads, --cpu-quota-aware on vs off: spin share of CPU (aware < 2%)
#      and commits/s aware/unaware (>= 1.2x). Needs root and cgroup v1.
#   d. seed 004: 64 threads, level 1, --recent-closed-bytes 16384 vs the
#      default: commits/s ratio (>= 0.8x).
#
# Environment: SECONDS_PER_RUN (default 5) per run; RUNS (default 3) per
# setting; BENCH_DIR (default bench/results) where the runs create their
# log files: put it on the disk you want to measure.
#
# Exit status: 0 when every run finished, 1 when one failed or hung (the
# exact command is printed); a missed goal is shown in the table only.

set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
RUNS=${RUNS:-3}
BENCH_DIR=${BENCH_DIR:-bench/results}
CGROUP=/sys/fs/cgroup/cpu/millrace-bench-$$

# run_one CASE SETTING REP CGROUP_OR_EMPTY ARGS...: one run with --json
# (run_json in lib.sh); its line, labelled, is appended to $OUT.
# RUN_SECONDS overrides SECONDS_PER_RUN.
run_one() {
    local case_name=$1 setting=$2 rep=$3 cgroup=$4
    shift 4
    local seconds=${RUN_SECONDS:-$SECONDS_PER_RUN}
    local cmd=("$BIN" bench log --json --dir "$BENCH_DIR" --seconds "$seconds" "$@")
    if [[ -n $cgroup ]]; then
        # The shell moves itself into the cgroup, then becomes the bench:
        # only the bench process is limited, not this script.
        # shellcheck disable=SC2016 # expanded by that shell
        cmd=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup" "${cmd[@]}")
    fi
    local limit_s
    limit_s=$(hang_limit_s "$seconds" 1)
    run_json "$case_name" "$setting" "$rep" "$limit_s" "${cmd[@]}"
}

cgroup_v1_usable() {
    [[ $(id -u) == 0 && -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]
}

make_cgroup() {
    mkdir "$CGROUP"
    trap 'rmdir "$CGROUP" 2>/dev/null || true' EXIT
    echo 100000 >"$CGROUP/cpu.cfs_period_us"
    echo 90000 >"$CGROUP/cpu.cfs_quota_us"
}

start_figures log

# a. One committer: a commit is one write and one flush; how close to the
# bare flush does it get?
for rep in $(seq "$RUNS"); do
    for writers in off on; do
        run_one a "$writers" "$rep" "" --threads 1 --level 1 --log-writer-threads "$writers"
    done
done

# b. 64 committers: group commit should share each flush among many.
for rep in $(seq "$RUNS"); do
    for writers in off on; do
        run_one b "$writers" "$rep" "" --threads 64 --level 1 --log-writer-threads "$writers" --no-baseline
    done
    # The same leader mode with MySQL 8.0's rule of spinning whether or not
    # the fdatasync in flight covers the commit.
    run_one b "off-spin-always" "$rep" "" --threads 64 --level 1 --log-writer-threads off \
        --spin-inflight-only off --no-baseline
done

# c. Seed 000: under a CPU quota, spinning by the affinity mask burns the
# quota; the quota-aware decision should not spin.
if cgroup_v1_usable; then
    # The baseline once, outside the cgroup, to read the latencies against.
    RUN_SECONDS=1 run_one c baseline 1 "" --threads 1 --level 1
    make_cgroup
    for rep in $(seq "$RUNS"); do
        # aware-on vs aware-off isolates the CPU count (both spin whether or
        # not the flush in flight covers them, as MySQL 8.0 does; aware-off
        # is MySQL 8.0's policy). "default" is millrace's default policy.
        for aware in on off; do
            run_one c "aware-$aware" "$rep" "$CGROUP" --threads 64 --level 1 \
                --log-writer-threads on --cpu-quota-aware "$aware" --spin-inflight-only off \
                --no-baseline
        done
        run_one c "default" "$rep" "$CGROUP" --threads 64 --level 1 --log-writer-threads on \
            --no-baseline
    done
else
    log "case c skipped: needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu"
fi

# d. Seed 004: a small recent_closed should cost little throughput.
for rep in $(seq "$RUNS"); do
    for closed in 16384 default; do
        args=(--threads 64 --level 1 --no-baseline)
        [[ $closed == default ]] || args+=(--recent-closed-bytes "$closed")
        run_one d "closed-$closed" "$rep" "" "${args[@]}"
    done
done

# No table when no run finished: report_failures lists them instead.
if [[ -s $OUT ]]; then
    figures_py "$OUT" <<'EOF'
# A sixth column, the goal: replaces lib.sh's row().
def row(case, setting, key, value, comparison="", ratio=None, goal="", met=None):
    shown = f"{value * 100:.2f}%" if key.endswith("_share") and value is not None else fmt(value)
    cell = f"{key} = {shown}"
    ratio_cell = "n/a" if ratio is None else f"{ratio:.2f}x"
    if goal and met is not None:
        goal = f"{goal} ({'met' if met else 'MISSED'})"
    rows.append((case, setting, cell, comparison, ratio_cell if comparison else "", goal))

for w in ("off", "on"):
    p50, base = median("a", w, "p50_us"), median("a", w, "baseline_fsync_us")
    r = ratio_of(p50, base)
    row("a", f"writers {w}", "p50_us", p50, f"baseline_fsync_us = {fmt(base)}", r, "<= 1.3x",
        None if r is None else r <= 1.3)
for w in ("off", "on"):
    cpf = median("b", w, "commits_per_fsync")
    row("b", f"writers {w}", "commits_per_fsync", cpf, goal=">= 20",
        met=None if cpf is None else cpf >= 20)
    cps, single = median("b", w, "commits_per_s"), median("a", w, "commits_per_s")
    if w == "off":
        always = median("b", "off-spin-always", "commits_per_s")
        share = median("b", "off-spin-always", "spin_cpu_share")
        row("b", "off-spin-always", "commits_per_s", always, f"off: {fmt(cps)}",
            ratio_of(always, cps))
        row("b", "off-spin-always", "spin_cpu_share", share, f"off: {fmt(median('b', 'off', 'spin_cpu_share'))}")
    r = ratio_of(cps, single)
    row("b", f"writers {w}", "commits_per_s", cps, f"1 thread: {fmt(single)}", r, ">= 10x",
        None if r is None else r >= 10)
if any(k[0] == "c" for k in runs):
    base = median("c", "baseline", "baseline_fsync_us")
    for a in ("on", "off", "default"):
        s = f"aware-{a}" if a != "default" else a
        share = median("c", s, "spin_cpu_share")
        row("c", s, "spin_cpu_share", share, goal="< 2%" if a == "on" else "",
            met=None if share is None or a != "on" else share < 0.02)
        p50 = median("c", s, "p50_us")
        row("c", s, "p50_us", p50, f"baseline_fsync_us (outside) = {fmt(base)}", ratio_of(p50, base))
    on, off = median("c", "aware-on", "commits_per_s"), median("c", "aware-off", "commits_per_s")
    r = ratio_of(on, off)
    row("c", "aware-on", "commits_per_s", on, f"aware-off: {fmt(off)}", r, ">= 1.2x",
        None if r is None else r >= 1.2)
    d = median("c", "default", "commits_per_s")
    row("c", "default", "commits_per_s", d, f"aware-off: {fmt(off)}", ratio_of(d, off))
else:
    rows.append(("c", "skipped", "", "", "", "needs root and cgroup v1"))
small, default = median("d", "closed-16384", "commits_per_s"), median("d", "closed-default", "commits_per_s")
r = ratio_of(small, default)
row("d", "closed-16384", "commits_per_s", small, f"closed default: {fmt(default)}", r, ">= 0.8x",
    None if r is None else r >= 0.8)

n = max((len(v) for v in runs.values()), default=0)
print()
print(f"Medians of {n} runs per setting; raw lines in {sys.argv[1]}")
print()
print_table("case", "setting", "median value", "comparison", "ratio", "goal")
EOF
fi

report_failures
