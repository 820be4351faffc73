#!/usr/bin/env bash
# Every sysbench OLTP script against millrace: both prepared-statement modes,
# 1 and 64 threads, TABLES tables of ROWS rows; prepare, run, cleanup. Prints
# one line per run (TPS, errors sysbench ignored, FATAL lines), then whether
# cleanup left tables and whether the server logged errors. A check of the
# issue's "runs unmodified" across the whole matrix; the CI test
# (crates/cli/tests/sysbench.rs) runs a smaller one.
#
#   bench/sysbench_matrix.sh                        # about 2 minutes
#   TABLES=10 ROWS=10000 SECONDS_PER_RUN=10 bench/sysbench_matrix.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
TABLES=${TABLES:-10}
ROWS=${ROWS:-1000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
PORT=${PORT:-3397}
build_millrace --quiet
TMP=$(mktemp -d)
"$BIN" serve --data-dir "$TMP/data" --listen 127.0.0.1:$PORT --no-metrics \
    --buffer-pool-size 512M >"$TMP/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 60); do
    mariadb -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && break
    sleep 0.5
done
mariadb -h127.0.0.1 -P$PORT -uroot -e "CREATE DATABASE sbtest"
echo "machine: $(nproc) cores; $TABLES x $ROWS rows, ${SECONDS_PER_RUN}s per run"
failed=0
for w in oltp_insert oltp_update_index oltp_update_non_index oltp_delete \
         oltp_point_select oltp_read_only oltp_read_write oltp_write_only; do
    for ps in auto disable; do
        SB="--mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root --tables=$TABLES
            --table-size=$ROWS --db-ps-mode=$ps"
        sysbench $w $SB --threads=4 prepare >"$TMP/out" 2>&1 \
            || { echo "PREPARE FAILED: $w ps=$ps"; tail -3 "$TMP/out"; failed=1; }
        for t in 1 64; do
            sysbench $w $SB --threads=$t --time=$SECONDS_PER_RUN run >"$TMP/out" 2>&1 \
                || { echo "RUN FAILED: $w ps=$ps threads=$t"; failed=1; }
            tps=$(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$TMP/out" || echo -)
            ign=$(grep -oP 'ignored errors:\s+\K\d+' "$TMP/out" || echo -)
            fatal=$(grep -c FATAL "$TMP/out" || true)
            echo "$w ps=$ps threads=$t tps=$tps ignored_errors=$ign fatal=$fatal"
            [ "$fatal" = 0 ] || failed=1
        done
        sysbench $w $SB cleanup >"$TMP/out" 2>&1 || { echo "CLEANUP FAILED: $w ps=$ps"; failed=1; }
    done
done
left=$(mariadb -h127.0.0.1 -P$PORT -uroot -N -e "SHOW TABLES FROM sbtest" | wc -l)
errors=$(grep -c ERROR "$TMP/log" || true)
echo "tables left after cleanup: $left; server log ERROR lines: $errors"
[ "$left" = 0 ] && [ "$errors" = 0 ] && [ $failed = 0 ]
