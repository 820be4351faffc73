#!/usr/bin/env bash
# A long soak of `millrace serve` (release build): rotating sysbench
# workloads plus a verifier for a given time, sampling the server's RSS.
# At the end: memory over time, sysbench errors per workload, the
# verifier's result, and `millrace check` of the data directory after a
# clean shutdown. Exits 1 if the verifier found a violation, the server
# died or logged an ERROR, sysbench reported a FATAL error, `millrace
# check` failed, or memory grew more than MAX_GROWTH_PCT (see below).
#
#   bench/soak.sh                 # 30 minutes
#   bench/soak.sh --minutes 2     # a quick check
#
# Load: LANES (2) sysbench lanes run at once, THREADS (2) threads each; a
# lane runs oltp_read_write, oltp_update_index, oltp_insert, oltp_delete and
# oltp_point_select in turn, SLICE_SECONDS (60) each, `--db-ps-mode` auto and
# disable in alternate cycles; lane i starts i workloads further along, so
# different workloads overlap. Tables: TABLES (4) x ROWS (50000), in a
# buffer pool of BUFFER_POOL (64M), smaller than the data, so the pool is
# full (and RSS flat) after the prepare.
#
# Verifier (two transfer loops and a checker, through the mariadb client):
# soak.accounts holds VERIFY_ACCOUNTS rows of 1000. Each loop moves a random
# amount between two random accounts in one transaction (one mariadb process
# per transaction, which exits at its first error, so a deadlock or timeout
# leaves nothing half done), then increments its own counter row (autocommit)
# and counts the increments acknowledged. Every CHECK_SECONDS (60) the
# checker reads SUM(bal) twice in one transaction: both must equal the
# total. At the end, after a clean shutdown, `millrace check`, and a
# restart: the sum once more, and each counter must equal its acknowledged
# increments (no lost update, nothing lost by the shutdown).
#
# Memory: VmRSS of the server every SAMPLE_SECONDS (10). Growth compares the
# median RSS of two windows of W = min(5 minutes, run / 3): the second one
# ([W, 2W): after the prepare and the pool's filling) and the last one
# ([end - W, end]). For 30 minutes: minutes 5-10 against 25-30. Over
# MAX_GROWTH_PCT (10) percent is a failure.
#
# Environment: the upper-case names above, PORT (3398), SOAK_BIN (a
# millrace binary to run instead of building target/release/millrace).
# Needs sysbench, the mariadb client, python3. Raw output
# (sysbench, server log, RSS samples) goes to bench/results/soak-<stamp>/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

MINUTES=30
while (($#)); do
    case $1 in
        --minutes) MINUTES=$2; shift 2 ;;
        --minutes=*) MINUTES=${1#*=}; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
done
[[ $MINUTES =~ ^[0-9]+$ ]] && ((MINUTES > 0)) || { echo "--minutes wants a positive whole number" >&2; exit 2; }

LANES=${LANES:-2}
THREADS=${THREADS:-2}
SLICE_SECONDS=${SLICE_SECONDS:-60}
TABLES=${TABLES:-4}
ROWS=${ROWS:-50000}
BUFFER_POOL=${BUFFER_POOL:-64M}
VERIFY_ACCOUNTS=${VERIFY_ACCOUNTS:-16}
CHECK_SECONDS=${CHECK_SECONDS:-60}
SAMPLE_SECONDS=${SAMPLE_SECONDS:-10}
MAX_GROWTH_PCT=${MAX_GROWTH_PCT:-10}
PORT=${PORT:-3398}
WORKLOADS=(oltp_read_write oltp_update_index oltp_insert oltp_delete oltp_point_select)
TOTAL=$((VERIFY_ACCOUNTS * 1000))

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$RESULTS/soak-$STAMP
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/millrace-soak.XXXXXX)
DATA=$TMP/data
STOP=$TMP/stop
SERVER_PID=
PIDS=()

cleanup() {
    set +e
    touch "$STOP"
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

sql() { mariadb -h127.0.0.1 -P"$PORT" -uroot --connect-timeout=10 "$@"; }

start_server() { # log file
    "$BIN" serve --data-dir "$DATA" --listen 127.0.0.1:"$PORT" --no-metrics \
        --buffer-pool-size "$BUFFER_POOL" >>"$1" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        sql -e "select 1" >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server exited at start; see $1" >&2; return 1; }
        sleep 0.1
    done
    echo "the server did not answer within 60 s" >&2
    return 1
}

stop_server() { # SIGTERM and wait: a clean shutdown
    kill "$SERVER_PID"
    wait "$SERVER_PID" || { echo "the server exited with status $? at shutdown" >&2; return 1; }
    SERVER_PID=
}

if [ -n "${SOAK_BIN:-}" ]; then
    BIN=$SOAK_BIN
else
    log "building"
    build_millrace --quiet
fi
log "soak: $MINUTES minutes, $LANES lanes x $THREADS threads, $TABLES x $ROWS rows, pool $BUFFER_POOL; raw output in $OUT"
start_server "$OUT/server.log"
sql -e "CREATE DATABASE sbtest; CREATE DATABASE soak;
    CREATE TABLE soak.accounts (id INT PRIMARY KEY, bal BIGINT NOT NULL);
    CREATE TABLE soak.counters (id INT PRIMARY KEY, n BIGINT NOT NULL);"
sql -e "INSERT INTO soak.accounts VALUES $(seq 0 $((VERIFY_ACCOUNTS - 1)) | sed 's/.*/(&, 1000)/' | paste -sd,);
    INSERT INTO soak.counters VALUES (0, 0), (1, 0);"
SB=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS" --report-interval=0)
log "prepare"
sysbench oltp_read_write "${SB[@]}" --threads=2 prepare >"$OUT/prepare.log" 2>&1

START=$(date +%s)
END=$((START + MINUTES * 60))

# RSS sampler: "seconds-since-start rss-kib" lines.
(
    while [ ! -e "$STOP" ]; do
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || true)
        [ -n "$rss" ] && echo "$(($(date +%s) - START)) $rss"
        sleep "$SAMPLE_SECONDS"
    done
) >"$OUT/rss.txt" &
PIDS+=($!)

lane() { # lane number: runs slices until the end time
    local i=$1 n=$1 cycle=0
    while :; do
        local left=$((END - $(date +%s)))
        ((left >= 5)) || break
        local w=${WORKLOADS[$((n % ${#WORKLOADS[@]}))]} ps=auto
        ((cycle % 2)) && ps=disable
        local t=$((left < SLICE_SECONDS ? left : SLICE_SECONDS))
        {
            echo "=== lane $i workload $w ps-mode $ps time $t"
            sysbench "$w" "${SB[@]}" --threads="$THREADS" --time="$t" --db-ps-mode="$ps" run 2>&1 ||
                echo "=== exit status $?"
        } >>"$OUT/lane$i.log"
        n=$((n + 1))
        ((n % ${#WORKLOADS[@]} == i % ${#WORKLOADS[@]})) && cycle=$((cycle + 1))
    done
}
for i in $(seq 0 $((LANES - 1))); do
    lane "$i" &
    PIDS+=($!)
done

transfers() { # loop number: transfers, then its counter; writes its tallies
    local i=$1 ok=0 failed=0 acked=0
    while [ ! -e "$STOP" ] && (($(date +%s) < END)); do
        local a=$((RANDOM % VERIFY_ACCOUNTS)) b=$((RANDOM % VERIFY_ACCOUNTS)) amt=$((RANDOM % 100 + 1))
        ((a == b)) && continue
        if sql -e "BEGIN; UPDATE soak.accounts SET bal = bal - $amt WHERE id = $a;
                UPDATE soak.accounts SET bal = bal + $amt WHERE id = $b; COMMIT;" 2>>"$OUT/verifier-errors.log"; then
            ok=$((ok + 1))
        else
            failed=$((failed + 1))
        fi
        if sql -e "UPDATE soak.counters SET n = n + 1 WHERE id = $i" 2>>"$OUT/verifier-errors.log"; then
            acked=$((acked + 1))
        fi
    done
    echo "$i $ok $failed $acked" >"$TMP/transfers$i"
}
for i in 0 1; do
    transfers "$i" &
    PIDS+=($!)
done

check_sum() { # label: two reads of the sum in one transaction; appends to verifier.txt
    local got
    got=$(sql -N -e "BEGIN; SELECT SUM(bal) FROM soak.accounts; SELECT SUM(bal) FROM soak.accounts; COMMIT;" 2>&1 | paste -sd' ')
    echo "$1 $(($(date +%s) - START)) $got" >>"$OUT/verifier.txt"
    [ "$got" = "$TOTAL $TOTAL" ]
}

: >"$OUT/verifier.txt"
VERIFY_FAILED=0
next_check=$((START + CHECK_SECONDS))
while (($(date +%s) < END)); do
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server died during the soak" >&2; break; }
    if (($(date +%s) >= next_check)); then
        check_sum during || VERIFY_FAILED=1
        next_check=$((next_check + CHECK_SECONDS))
    fi
    sleep 1
done
SERVER_DIED=0
kill -0 "$SERVER_PID" 2>/dev/null || SERVER_DIED=1
touch "$STOP"
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

CHECK_OK=0
COUNTERS_OK=0
if ((SERVER_DIED == 0)); then
    check_sum end || VERIFY_FAILED=1
    stop_server || SERVER_DIED=1
    if "$BIN" check --dir "$DATA" >"$OUT/check.log" 2>&1; then CHECK_OK=1; fi
    start_server "$OUT/server.log"
    check_sum restart || VERIFY_FAILED=1
    COUNTERS_OK=1
    for i in 0 1; do
        read -r _ ok failed acked <"$TMP/transfers$i"
        n=$(sql -N -e "SELECT n FROM soak.counters WHERE id = $i")
        echo "transfer loop $i: $ok transfers committed, $failed failed; counter $n, $acked increments acknowledged" >>"$OUT/verifier.txt"
        [ "$n" = "$acked" ] || COUNTERS_OK=0
    done
    stop_server || SERVER_DIED=1
fi
SERVER_ERRORS=$(grep -c ERROR "$OUT/server.log" || true)

python3 - "$OUT" "$MINUTES" "$MAX_GROWTH_PCT" "$TOTAL" "$VERIFY_FAILED" "$COUNTERS_OK" \
    "$CHECK_OK" "$SERVER_DIED" "$SERVER_ERRORS" <<'EOF'
import glob, re, statistics, sys
out, minutes, max_growth, total = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
verify_failed, counters_ok, check_ok, died, server_errors = (int(x) for x in sys.argv[5:10])
failed = []

samples = [tuple(map(int, l.split())) for l in open(f"{out}/rss.txt") if l.strip()]
mib = lambda kib: kib / 1024
print(f"## Memory (server VmRSS, {len(samples)} samples)\n")
if samples:
    rss = [r for _, r in samples]
    step = max(1, len(samples) // 20)
    print("| time | RSS MiB |\n|---|---|")
    for t, r in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        print(f"| {t // 60}m{t % 60:02d}s | {mib(r):.1f} |")
    print(f"\nfirst {mib(rss[0]):.1f} MiB, median {mib(statistics.median(rss)):.1f}, "
          f"last {mib(rss[-1]):.1f}, max {mib(max(rss)):.1f}")
    end = samples[-1][0]
    w = min(300, end / 3)
    early = [r for t, r in samples if w <= t < 2 * w]
    late = [r for t, r in samples if t >= end - w]
    if early and late:
        a, b = statistics.median(early), statistics.median(late)
        growth = 100 * (b - a) / a
        print(f"growth: median {mib(a):.1f} MiB in [{w:.0f}s, {2*w:.0f}s) -> {mib(b):.1f} MiB "
              f"in the last {w:.0f}s: {growth:+.1f}% (limit {max_growth:+.0f}%)")
        if growth > max_growth:
            failed.append(f"memory grew {growth:.1f}% (over {max_growth}%)")
    else:
        failed.append("too few RSS samples to judge growth")
else:
    failed.append("no RSS samples")

print("\n## sysbench, per workload\n")
print("| workload | slices | transactions | ignored errors | FATAL lines | failed runs |\n|---|---|---|---|---|---|")
per = {}
for path in sorted(glob.glob(f"{out}/lane*.log")):
    w = None
    for line in open(path, errors="replace"):
        m = re.match(r"=== lane \d+ workload (\S+)", line)
        if m:
            w = m.group(1)
            per.setdefault(w, [0, 0, 0, 0, 0])[0] += 1
            continue
        if w is None:
            continue
        if m := re.search(r"transactions:\s+(\d+)", line):
            per[w][1] += int(m.group(1))
        if m := re.search(r"ignored errors:\s+(\d+)", line):
            per[w][2] += int(m.group(1))
        if "FATAL" in line:
            per[w][3] += 1
        if line.startswith("=== exit status"):
            per[w][4] += 1
for w, (slices, trx, ign, fatal, bad) in sorted(per.items()):
    print(f"| {w} | {slices} | {trx} | {ign} | {fatal} | {bad} |")
    if fatal or bad:
        failed.append(f"sysbench {w}: {fatal} FATAL lines, {bad} failed runs")

print("\n## Verifier\n")
print(open(f"{out}/verifier.txt").read().rstrip())
checks = [l for l in open(f"{out}/verifier.txt") if l.split()[0] in ("during", "end", "restart")]
bad_sums = [l.strip() for l in checks if l.split()[2:] != [total, total]]
print(f"\nsum checks: {len(checks)}, wrong: {len(bad_sums)} (want {total} twice in one transaction)")
if verify_failed or bad_sums:
    failed.append(f"balance sum wrong: {bad_sums}")
if not counters_ok:
    failed.append("a counter differs from its acknowledged increments")
print(f"millrace check after the clean shutdown: {'ok' if check_ok else 'FAILED (see check.log)'}")
if not check_ok:
    failed.append("millrace check failed")
if died:
    failed.append("the server died or did not stop cleanly")
print(f"server log ERROR lines: {server_errors}")
if server_errors:
    failed.append(f"{server_errors} ERROR lines in the server log")

print("\n## Result: " + ("PASS" if not failed else "FAIL\n- " + "\n- ".join(failed)))
sys.exit(1 if failed else 0)
EOF
