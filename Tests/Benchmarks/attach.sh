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
WARMUP=3
FILES=20
FILE_SIZE=$((64 * 1024 * 1024))
RATE=100k
NGINX=${NGINX:-/usr/sbin/nginx}
KEEP=${KEEP:-0}
SPREAD=${SPREAD:-0}

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
HAUL=${HAUL:-$repo_root/.build/release/haul}


BENCH=attach.sh
# The checks, the temp dir, the throttled nginx, the URLs and the shared helpers.
source "$script_dir/throttled-nginx.sh"


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
