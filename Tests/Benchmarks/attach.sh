#!/usr/bin/env bash
# Tests/Benchmarks/attach.sh — what attached UIs cost a running queue (issue 17).
#
# Not a test: it prints numbers. A runner (`haul start`) downloads 20 throttled
# files from a private nginx (100 KB/s each); over a window of DURATION seconds
# it measures, with 0, 1 and 2 UIs attached (`haul` in 120x30 tmux panes, their
# output recorded with `tmux pipe-pane`):
#   - the runner's CPU, and the attached UIs' CPU (utime+stime from /proc, as a
#     percentage of ONE core);
#   - each attached UI's terminal bytes per second;
# and, for comparison, the same 20 downloads in one haul whose UI runs the
# queue in-process (today's UI), alone and then with a UI attached to it, the two
# drawing the same queue in the same window. Each round runs every case; medians quoted.
#
# Targets: two attached UIs cost at most 1.5x one (runner + UIs, total CPU);
# an attached UI writes no more bytes to its terminal than the in-process UI.
#
# Run (from the repo root):
#   swift build -c release && Tests/Benchmarks/attach.sh
# Environment: HAUL=path (default .build/release/haul), ROUNDS=3, DURATION=20,
#   NGINX=/usr/sbin/nginx, KEEP=1 (keep the temp dir).
# Needs: tmux, nginx, awk, Linux /proc.

set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20}
IDLE=0
WARMUP=3
FILES=20
FILE_SIZE=$((64 * 1024 * 1024))
RATE=100k
ARIA2C=${ARIA2C:-aria2c}
NGINX=${NGINX:-/usr/sbin/nginx}
SHOW_SCREEN=${SHOW_SCREEN:-0}
KEEP=${KEEP:-0}
SPREAD=${SPREAD:-0}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
HAUL=${HAUL:-$repo_root/.build/release/haul}

die() { echo "attach.sh: $*" >&2; exit 1; }

if [[ ! -x $HAUL ]]; then
    echo "attach.sh: no haul binary at $HAUL" >&2
    echo "attach.sh: run \`swift build -c release\` first (or set HAUL=path)" >&2
    exit 1
fi
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
command -v tmux >/dev/null || die "tmux not found"
[[ -x $NGINX ]] || die "nginx not found at $NGINX (set NGINX=path)"
[[ -r /proc/self/stat ]] || die "needs Linux /proc"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive integer"
[[ $IDLE =~ ^[0-9]+$ ]] || die "IDLE must be a non-negative integer"

CLK_TCK=$(getconf CLK_TCK)
CORES=$(nproc 2>/dev/null || echo '?')
# haul draws UTF-8 bars in a UTF-8 locale, as most users have.
BENCH_LANG=C.UTF-8
locale -a 2>/dev/null | grep -qix 'c.utf-\?8' || BENCH_LANG=${LANG:-C}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/haul-attach-bench.XXXXXX")
SOCKETS=()
NGINX_STARTED=0

cleanup() {
    local rc=$? s pid
    trap - EXIT INT TERM HUP
    for s in "${SOCKETS[@]}"; do
        timeout 5 tmux -S "$s" kill-server >/dev/null 2>&1 || true
    done
    if [[ $NGINX_STARTED == 1 && -s $TMP/nginx/nginx.pid ]]; then
        pid=$(cat "$TMP/nginx/nginx.pid" 2>/dev/null || true)
        if [[ -n $pid ]]; then
            kill -QUIT "$pid" 2>/dev/null || true
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    if [[ $KEEP == 1 ]]; then
        echo "attach.sh: kept $TMP" >&2
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------- server ----

# The nginx workers may run as another user: let them read the files.
chmod 755 "$TMP"
mkdir -p "$TMP/nginx/logs" "$TMP/nginx/tmp" "$TMP/www/files"
chmod -R 755 "$TMP/www"
for i in $(seq -f '%02g' 1 "$FILES"); do
    truncate -s "$FILE_SIZE" "$TMP/www/files/f$i.bin"   # sparse is fine
done
chmod 644 "$TMP"/www/files/*

# start_nginx PORT... : one server listening on every PORT given.
start_nginx() {
    local conf=$TMP/nginx/nginx.conf user_line='' listens='' p
    for p in "$@"; do listens+="        listen 127.0.0.1:$p;"$'\n'; done
    # As root, keep the workers as root so they can read the temp dir anyway.
    [[ $(id -u) == 0 ]] && user_line='user root;'
    cat >"$conf" <<EOF
$user_line
daemon on;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 256; }
http {
    access_log $TMP/nginx/logs/access.log;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 30;
    server {
$listens        root $TMP/www;
        location /files/ {
            limit_rate $RATE;
        }
    }
}
EOF
    timeout 10 "$NGINX" -e "$TMP/nginx/logs/error.log" -c "$conf" -p "$TMP/nginx/" \
        >/dev/null 2>&1
}

# SPREAD=1: each file on its own port, so no per-host connection limit of
# the client applies. Default: all 20 on one port, as a user would have it.
nports=1
[[ $SPREAD == 1 ]] && nports=$FILES
PORT=''
for (( base = 18500; base + nports <= 18700; base += nports )); do
    ports=() busy=0
    for (( p = base; p < base + nports; p++ )); do
        # Skip ports something already answers on; nginx may still fail to bind.
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then busy=1; break; fi
        ports+=("$p")
    done
    (( busy )) && continue
    if start_nginx "${ports[@]}"; then PORT=$base; NGINX_STARTED=1; break; fi
done
[[ -n $PORT ]] || die "could not start nginx on 127.0.0.1:18500-18699 (see $TMP/nginx/logs/error.log)"
for _ in $(seq 1 50); do
    [[ -s $TMP/nginx/nginx.pid ]] && break
    sleep 0.1
done
probe_bytes=$(timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT; \
        printf 'HEAD /files/f01.bin HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3" \
    | tr -d '\r' | awk -F': ' 'tolower($1)=="content-length"{print $2}') || true
[[ $probe_bytes == "$FILE_SIZE" ]] || die "nginx on port $PORT does not serve the files (got length '$probe_bytes')"

URLS=()
for (( i = 1; i <= FILES; i++ )); do
    port=$PORT
    [[ $SPREAD == 1 ]] && port=$(( PORT + i - 1 ))
    URLS+=("$(printf 'http://127.0.0.1:%d/files/f%02d.bin' "$port" "$i")")
done
quoted_urls=$(printf ' %q' "${URLS[@]}")

# --------------------------------------------------------------- helpers ----

printf 'set -g status off\nset -g remain-on-exit on\nset -g history-limit 100\n' \
    >"$TMP/tmux.conf"

# utime+stime of PID, in clock ticks (fields 14 and 15 of /proc/PID/stat;
# cut after the last ')' since the command name may hold spaces).
cpu_ticks() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo ''; return; }
    stat=${stat##*) }
    awk '{ print $12 + $13 }' <<<"$stat"
}

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# Sum of the file sizes under DIR, not counting aria2's control files.
dir_bytes() {
    [[ -d $1 ]] || { echo 0; return; }
    find "$1" -type f ! -name '*.aria2' -printf '%s\n' 2>/dev/null \
        | awk '{ s += $1 } END { printf "%d\n", s }'
}

now() { date +%s.%N; }

pane_field() { timeout 5 tmux -S "$1" display-message -p -t bench "$2" 2>/dev/null || true; }

median() {  # numbers on stdin -> median
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}


# start_ui NAME CMD -> a tmux server running CMD with its output recorded; echoes the pane pid.
start_ui() {
    local name=$1 cmd=$2 sock=$TMP/tmux-$1.sock
    SOCKETS+=("$sock")
    : >"$TMP/term-$name.out"
    timeout 10 tmux -S "$sock" -f "$TMP/tmux.conf" new-session -d -s bench \
        -x 120 -y 30 "cd $(printf %q "$TMP") && exec env LANG=$BENCH_LANG LC_ALL=$BENCH_LANG $cmd" \
        || die "tmux new-session failed for $name"
    timeout 5 tmux -S "$sock" pipe-pane -o -t bench "cat >> $(printf %q "$TMP/term-$name.out")" || die "pipe-pane failed"
    timeout 5 tmux -S "$sock" list-panes -t bench -F '#{pane_pid}' | head -n1
}

stop_ui() {  # NAME: D leaves an attached UI, q quits an in-process one
    local sock=$TMP/tmux-$1.sock
    timeout 5 tmux -S "$sock" send-keys -t bench "$2" >/dev/null 2>&1 || true
    sleep 0.5
    timeout 5 tmux -S "$sock" kill-server >/dev/null 2>&1 || true
}

# measure LABEL RUNNER_PID "UI_PIDS" "UI_NAMES" -> one line in $TMP/results-LABEL:
# runner_cpu ui_cpu total_cpu term_Bps_per_ui
measure() {
    local label=$1 runner=$2 uis=$3 names=$4 t0 t1 r0 r1 u0=0 u1=0 s0=0 s1=0 p n c
    t0=$(now); r0=$(cpu_ticks "$runner")
    for p in $uis; do c=$(cpu_ticks "$p"); u0=$(( u0 + ${c:-0} )); done
    for n in $names; do s0=$(( s0 + $(file_size "$TMP/term-$n.out") )); done
    sleep "$DURATION"
    t1=$(now); r1=$(cpu_ticks "$runner")
    for p in $uis; do c=$(cpu_ticks "$p"); u1=$(( u1 + ${c:-0} )); done
    for n in $names; do s1=$(( s1 + $(file_size "$TMP/term-$n.out") )); done
    local count
    count=$(wc -w <<<"$names")
    awk -v t0="$t0" -v t1="$t1" -v r0="$r0" -v r1="$r1" -v u0="$u0" -v u1="$u1" -v s0="$s0" -v s1="$s1" \
        -v k="$count" -v hz="$CLK_TCK" 'BEGIN {
            dt = t1 - t0; r = 100 * (r1 - r0) / hz / dt; u = 100 * (u1 - u0) / hz / dt
            printf "%.2f %.2f %.2f %.0f\n", r, u, r + u, (k > 0 ? (s1 - s0) / dt / k : 0)
        }' >>"$TMP/results-$label"
    printf '  %-14s %s\n' "$label" "$(tail -n1 "$TMP/results-$label" | awk '{ printf "runner %5.2f%%  UIs %5.2f%%  total %5.2f%%  %6.0f B/s per UI", $1, $2, $3, $4 }')" >&2
}

echo "haul attach benchmark: $FILES downloads at $RATE/s each, 120x30 panes, ${DURATION}s windows, $ROUNDS round(s)" >&2
echo "haul: $HAUL   nginx: 127.0.0.1:$PORT" >&2
for round in $(seq 1 "$ROUNDS"); do
    state=$TMP/state-$round dl=$TMP/dl-$round
    mkdir -p "$dl"
    HAUL_STATE_DIR=$state "$HAUL" start -d "$dl" -j "$FILES" "${URLS[@]}" >/dev/null || die "haul start failed"
    runner=$(cat "$state/lock")
    sleep "$WARMUP"
    measure attached-0 "$runner" "" ""
    ui1=$(start_ui "a1-$round" "HAUL_STATE_DIR=$(printf %q "$state") $(printf %q "$HAUL")")
    sleep "$WARMUP"
    measure attached-1 "$runner" "$ui1" "a1-$round"
    ui2=$(start_ui "a2-$round" "HAUL_STATE_DIR=$(printf %q "$state") $(printf %q "$HAUL")")
    sleep "$WARMUP"
    measure attached-2 "$runner" "$ui1 $ui2" "a1-$round a2-$round"
    timeout 5 tmux -S "$TMP/tmux-a1-$round.sock" capture-pane -p -t bench >"$TMP/screen-attached-$round.txt" 2>/dev/null || true
    stop_ui "a2-$round" D; stop_ui "a1-$round" D
    HAUL_STATE_DIR=$state "$HAUL" stop >/dev/null || die "haul stop failed"
    rm -rf "$dl"

    # Today's UI, the queue in its own process (the pane's process is runner and UI at once), with
    # a UI attached to it: both draw the same queue at the same moments, so their terminal bytes
    # compare like for like (separate runs see other byte counts and widths).
    mkdir -p "$dl-in"
    pid=$(start_ui "in-$round" "HAUL_STATE_DIR=$(printf %q "$TMP/state-in-$round") $(printf %q "$HAUL") -d $(printf %q "$dl-in") -j $FILES$quoted_urls")
    sleep "$WARMUP"
    measure in-process "$pid" "" "in-$round"
    start_ui "side-$round" "HAUL_STATE_DIR=$(printf %q "$TMP/state-in-$round") $(printf %q "$HAUL")" >/dev/null
    sleep "$WARMUP"
    a0=$(file_size "$TMP/term-in-$round.out"); b0=$(file_size "$TMP/term-side-$round.out"); t0=$(now)
    sleep "$DURATION"
    a1=$(file_size "$TMP/term-in-$round.out"); b1=$(file_size "$TMP/term-side-$round.out"); t1=$(now)
    awk -v a="$(( a1 - a0 ))" -v b="$(( b1 - b0 ))" -v t0="$t0" -v t1="$t1" 'BEGIN {
        printf "%.0f %.0f\n", a / (t1 - t0), b / (t1 - t0) }' >>"$TMP/results-side"
    printf '  %-14s in-process UI %6.0f B/s, attached to it at the same time %6.0f B/s\n' side \
        "$(tail -n1 "$TMP/results-side" | awk '{ print $1 }')" "$(tail -n1 "$TMP/results-side" | awk '{ print $2 }')" >&2
    stop_ui "side-$round" D
    stop_ui "in-$round" q
    rm -rf "$dl-in"
done

col() { awk -v c="$2" '{ print $c }' "$TMP/results-$1" | median; }
echo
echo "Attached UIs, median of $ROUNDS round(s), ${DURATION}s windows, $FILES downloads x $RATE/s, 120x30"
echo "(machine: $CORES cores, shared; CPU is % of ONE core)"
printf '%-34s %12s %10s %10s %14s\n' case 'runner CPU%' 'UIs CPU%' 'total CPU%' 'terminal B/s'
printf '%-34s %12s %10s %10s %14s\n' ---- ----------- -------- ---------- ------------
row() { printf '%-34s %12.2f %10.2f %10.2f %14.0f\n' "$2" "$(col "$1" 1)" "$(col "$1" 2)" "$(col "$1" 3)" "$(col "$1" 4)"; }
row attached-0 "runner, no UI attached"
row attached-1 "runner + 1 attached UI"
row attached-2 "runner + 2 attached UIs (per UI)"
row in-process "in-process UI (runner and UI)"
echo
printf '%-34s %14s\n' "same queue, same window" 'terminal B/s'
printf '%-34s %14.0f\n' "in-process UI" "$(col side 1)"
printf '%-34s %14.0f\n' "a UI attached to it" "$(col side 2)"
echo
awk -v one="$(col attached-1 3)" -v two="$(col attached-2 3)" -v inp="$(col side 1)" -v at="$(col side 2)" 'BEGIN {
    printf "two UIs / one UI (total CPU): %.2fx (target <= 1.5x: %s)\n", (one > 0 ? two / one : 0), (two <= 1.5 * one ? "met" : "MISSED")
    printf "attached UI / in-process UI, same queue and window (terminal bytes): %.3fx (target <= 1x: %s)\n", (inp > 0 ? at / inp : 0), (at <= inp ? "met" : "MISSED")
}'
