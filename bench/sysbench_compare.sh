#!/usr/bin/env bash
# millrace, MariaDB 10.11 and PostgreSQL 15 side by side under the same
# unmodified sysbench 1.0.20 workloads. Each server runs from a temporary
# data directory, durable at every commit (millrace level 1,
# innodb_flush_log_at_trx_commit=1, synchronous_commit=on + fsync=on).
# Each gets the same TABLES x ROWS tables; then every (workload, threads)
# cell runs on the three systems in turn, ROUNDS times, interleaved with the
# order reversed every other round (A B C C B A ...), after one warm-up run each. Printed: one markdown table of
# median TPS and median p95 latency, with ratios to MariaDB.
#
#   bench/sysbench_compare.sh            # defaults below
#   ROWS=10000 SECONDS_PER_RUN=5 ROUNDS=1 bench/sysbench_compare.sh   # quick
#
# Environment: TABLES (10), ROWS (100000), SECONDS_PER_RUN (15), ROUNDS (3),
# WORKLOADS ("oltp_update_index oltp_insert oltp_point_select
# oltp_read_write"), THREADS ("1 64"), PS_MODE (disable), SYSTEMS
# ("millrace mariadb postgres"), BASE_SYSTEM (mariadb: the ratios' base).
# BASELINE_BIN=path adds the system "baseline": another millrace binary
# (e.g. built from an earlier commit), run exactly as millrace is, for
# before/after figures of a change in the same interleaved run:
#   BASELINE_BIN=/tmp/old/millrace SYSTEMS="baseline millrace" \
#       BASE_SYSTEM=baseline bench/sysbench_compare.sh
# Needs: apt-get install sysbench
# mariadb-server mariadb-client postgresql-15; run as root (PostgreSQL runs
# as the postgres user). Raw sysbench output goes to bench/results/.

set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

TABLES=${TABLES:-10}
ROWS=${ROWS:-100000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15}
ROUNDS=${ROUNDS:-3}
WORKLOADS=${WORKLOADS:-"oltp_update_index oltp_insert oltp_point_select oltp_read_write"}
THREADS=${THREADS:-"1 64"}
PS_MODE=${PS_MODE:-disable}
SYSTEMS=${SYSTEMS:-"millrace mariadb postgres"}
BASE_SYSTEM=${BASE_SYSTEM:-mariadb}
BASELINE_BIN=${BASELINE_BIN:-}
STAMP=$(date +%Y%m%d-%H%M%S)
RAW="$RESULTS/sysbench-$STAMP.log"
TMP=$(mktemp -d /tmp/millrace-compare.XXXXXX)
chmod 755 "$TMP" # PostgreSQL runs as the postgres user under it
MILLRACE_PORT=3316
MARIADB_PORT=3317
BASELINE_PORT=3318
PG_PORT=5433
PGBIN=/usr/lib/postgresql/15/bin
mkdir -p "$RESULTS"

cleanup() {
    set +e
    [ -n "${MILLRACE_PID:-}" ] && kill "$MILLRACE_PID" 2>/dev/null && wait "$MILLRACE_PID" 2>/dev/null
    [ -n "${BASELINE_PID:-}" ] && kill "$BASELINE_PID" 2>/dev/null && wait "$BASELINE_PID" 2>/dev/null
    [ -S "$TMP/mariadb/mysql.sock" ] && mariadb-admin -S "$TMP/mariadb/mysql.sock" -uroot shutdown 2>/dev/null
    [ -d "$TMP/pg/data" ] && su postgres -c "$PGBIN/pg_ctl -D $TMP/pg/data -m fast stop" >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT

build_millrace --quiet

wait_for() { # command... : retried for up to 60 s
    for _ in $(seq 1 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "timed out waiting for: $*" >&2
    return 1
}

start_millrace_bin() { # binary name port: sets SERVER_PID
    local bin=$1 name=$2 port=$3
    mkdir -p "$TMP/$name"
    "$bin" serve --data-dir "$TMP/$name/data" --listen 127.0.0.1:"$port" \
        --no-metrics --buffer-pool-size 4G >"$TMP/$name/log" 2>&1 &
    SERVER_PID=$!
    wait_for mariadb -h127.0.0.1 -P"$port" -uroot -e "select 1"
    mariadb -h127.0.0.1 -P"$port" -uroot -e "CREATE DATABASE sbtest"
}

start_millrace() {
    start_millrace_bin "$BIN" millrace $MILLRACE_PORT
    MILLRACE_PID=$SERVER_PID
}

start_baseline() {
    [ -x "$BASELINE_BIN" ] || { echo "BASELINE_BIN ($BASELINE_BIN) is not an executable millrace binary" >&2; exit 1; }
    start_millrace_bin "$BASELINE_BIN" baseline $BASELINE_PORT
    BASELINE_PID=$SERVER_PID
}

start_mariadb() {
    local d="$TMP/mariadb"
    mkdir -p "$d"
    cat >"$d/my.cnf" <<EOF
[mysqld]
datadir=$d/data
socket=$d/mysql.sock
port=$MARIADB_PORT
bind-address=127.0.0.1
user=root
innodb_buffer_pool_size=4G
innodb_log_file_size=1G
innodb_flush_log_at_trx_commit=1
innodb_flush_method=O_DIRECT
max_connections=1000
max_prepared_stmt_count=100000
skip-log-bin
EOF
    mariadb-install-db --no-defaults --datadir="$d/data" \
        --auth-root-authentication-method=normal --user=root >"$d/install.log" 2>&1
    mariadbd --defaults-file="$d/my.cnf" >"$d/log" 2>&1 &
    wait_for mariadb -S "$d/mysql.sock" -uroot -e "select 1"
    mariadb -S "$d/mysql.sock" -uroot -e "CREATE DATABASE sbtest"
}

start_postgres() {
    local d="$TMP/pg"
    mkdir -p "$d"
    chown postgres "$d"
    su postgres -c "$PGBIN/initdb -D $d/data -A trust" >"$d/initdb.log" 2>&1 ||
        { cat "$d/initdb.log" >&2; return 1; }
    su postgres -c "$PGBIN/pg_ctl -D $d/data -o '-p $PG_PORT -k $d -c shared_buffers=2GB \
        -c max_connections=200 -c max_wal_size=4GB -c synchronous_commit=on -c fsync=on' \
        -l $d/log start" >/dev/null
    wait_for su postgres -c "psql -h $d -p $PG_PORT -c 'select 1'"
    su postgres -c "psql -h $d -p $PG_PORT -c 'CREATE DATABASE sbtest'" >/dev/null
}

sb() { # system workload threads step
    local sys=$1 w=$2 t=$3 step=$4 conn
    case $sys in
        millrace) conn="--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$MILLRACE_PORT --mysql-user=root --mysql-db=sbtest" ;;
        baseline) conn="--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$BASELINE_PORT --mysql-user=root --mysql-db=sbtest" ;;
        mariadb) conn="--db-driver=mysql --mysql-socket=$TMP/mariadb/mysql.sock --mysql-user=root --mysql-db=sbtest" ;;
        postgres) conn="--db-driver=pgsql --pgsql-host=$TMP/pg --pgsql-port=$PG_PORT --pgsql-user=postgres --pgsql-db=sbtest" ;;
    esac
    # shellcheck disable=SC2086
    sysbench "$w" $conn --tables="$TABLES" --table-size="$ROWS" --threads="$t" \
        --time="$SECONDS_PER_RUN" --report-interval=0 --db-ps-mode="$PS_MODE" \
        --percentile=95 "$step"
}

echo "machine: $(nproc) cores, $(uname -r); $TABLES x $ROWS rows, ${SECONDS_PER_RUN}s per run, $ROUNDS rounds, ps-mode $PS_MODE" | tee "$RAW"
for sys in $SYSTEMS; do
    "start_$sys"
    echo "prepare $sys" | tee -a "$RAW"
    # oltp_insert adds rows; every workload runs on the tables one prepare made.
    sb "$sys" oltp_read_write 1 prepare >>"$RAW" 2>&1
done

declare -A TPS P95
for w in $WORKLOADS; do
    for t in $THREADS; do
        for sys in $SYSTEMS; do sb "$sys" "$w" "$t" run >/dev/null 2>&1 || true; done # warm-up
        for r in $(seq 1 "$ROUNDS"); do
            # Odd rounds in SYSTEMS order, even rounds reversed (A B, B A,
            # ...): a run that leaves work behind (purge, flushing) slows
            # whichever system runs next, and alternating spreads that.
            order=$SYSTEMS
            if [ $((r % 2)) -eq 0 ]; then order=$(echo "$SYSTEMS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
            for sys in $order; do
                out=$(sb "$sys" "$w" "$t" run 2>&1) || { echo "$sys $w $t failed:" >&2; echo "$out" | tail -5 >&2; }
                echo "=== $sys $w threads=$t round=$r" >>"$RAW"
                echo "$out" >>"$RAW"
                tps=$(echo "$out" | awk '/transactions:/ {gsub(/\(/,"",$3); print $3}')
                p95=$(echo "$out" | awk '/95th percentile:/ {print $3}')
                TPS[$w,$t,$sys]="${TPS[$w,$t,$sys]:-} ${tps:-0}"
                P95[$w,$t,$sys]="${P95[$w,$t,$sys]:-} ${p95:-0}"
            done
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo
echo "| workload | threads | system | TPS (median) | p95 ms (median) | TPS / $BASE_SYSTEM | p95 / $BASE_SYSTEM |"
echo "|---|---|---|---|---|---|---|"
for w in $WORKLOADS; do
    for t in $THREADS; do
        base_tps=$(echo "${TPS[$w,$t,$BASE_SYSTEM]:-0}" | median)
        base_p95=$(echo "${P95[$w,$t,$BASE_SYSTEM]:-0}" | median)
        for sys in $SYSTEMS; do
            tps=$(echo "${TPS[$w,$t,$sys]}" | median)
            p95=$(echo "${P95[$w,$t,$sys]}" | median)
            rt=$(awk -v a="$tps" -v b="$base_tps" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
            rp=$(awk -v a="$p95" -v b="$base_p95" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
            printf '| %s | %s | %s | %.0f | %s | %s | %s |\n' "$w" "$t" "$sys" "$tps" "$p95" "$rt" "$rp"
        done
    done
done
echo
echo "raw sysbench output: $RAW"
