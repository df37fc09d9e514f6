#!/usr/bin/env bash
# Tests/Benchmarks/tui.sh — cost of haul's terminal UI, next to aria2c.
#
# Not a test: it prints numbers. For 20 throttled downloads shown at once it
# measures, over a window of DURATION seconds (after a 3 s warm-up):
#   - terminal bytes/s: bytes the tool writes to its terminal (a 120x30 tmux
#     pane of a private tmux server, socket in the temp dir, recorded with
#     `tmux pipe-pane`);
#   - CPU %: utime+stime of the tool's process (/proc/PID/stat) over the
#     window, as a percentage of ONE core (the whole process: drawing AND
#     downloading);
#   - bytes downloaded in the window (sizes in the download directory), to
#     show both tools were really downloading (20 x 100 KB/s ~ 2 MB/s).
# Each tool runs ROUNDS times; the table quotes the median of each column.
# A last haul run with nothing to download gives its idle cost.
#
# Targets for haul at the default refresh: <= 6 KB/s of terminal output and
# <= 3% of one core.
#
# Everything lives in a temp dir (its own nginx on 127.0.0.1:18500+, serving
# 20 sparse 64 MiB files with `limit_rate 100k`), removed on exit.
#
# Run (from the repo root):
#   swift build -c release && Tests/Benchmarks/tui.sh
# Environment:
#   HAUL=path        haul binary (default: .build/release/haul of this repo)
#   ROUNDS=3         runs per tool (median quoted)
#   DURATION=30      measured window in seconds (e.g. DURATION=10 ROUNDS=1
#                    for a quick check)
#   IDLE=10          seconds of the idle haul run (0 skips it)
#   ARIA2C=aria2c    aria2c binary
#   NGINX=/usr/sbin/nginx
#   SHOW_SCREEN=1    print one screen of haul, captured mid-window
#   KEEP=1           keep the temp dir (logs, captures) instead of deleting it
#   SPREAD=1         serve each file on its own port (20 ports) instead of all
#                    from one host:port, so a client's per-host connection
#                    limit cannot keep some of the 20 downloads waiting
# Needs: tmux, nginx, aria2c, awk, Linux /proc.

set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-30}
IDLE=${IDLE:-10}
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

BENCH=tui.sh
command -v "$ARIA2C" >/dev/null || { echo "tui.sh: aria2c not found (set ARIA2C=path)" >&2; exit 1; }
[[ $IDLE =~ ^[0-9]+$ ]] || { echo "tui.sh: IDLE must be a non-negative integer" >&2; exit 1; }

# The checks, the temp dir, the throttled nginx, the URLs and the shared helpers.
source "$script_dir/throttled-nginx.sh"

# run_one TOOL ROUND WINDOW CMD -> appends "term_Bps cpu_pct dl_Bps" to
# $TMP/results-TOOL. CMD must `exec` the tool so the pane pid is the tool.
run_one() {
    local tool=$1 round=$2 window=$3 cmd=$4
    local sock=$TMP/tmux-$tool-$round.sock   # private tmux server
    local out=$TMP/term-$tool-$round.out dl=$TMP/dl-$tool-$round
    local pid t0 t1 s0 s1 c0 c1 d0 d1 dead
    SOCKETS+=("$sock")
    : >"$out"
    mkdir -p "$dl"
    timeout 10 tmux -S "$sock" -f "$TMP/tmux.conf" new-session -d -s bench \
        -x 120 -y 30 "cd $(printf %q "$TMP") && exec env LANG=$BENCH_LANG LC_ALL=$BENCH_LANG $cmd" \
        || die "tmux new-session failed for $tool"
    timeout 5 tmux -S "$sock" pipe-pane -o -t bench "cat >> $(printf %q "$out")" \
        || die "tmux pipe-pane failed for $tool"
    pid=$(timeout 5 tmux -S "$sock" list-panes -t bench -F '#{pane_pid}' | head -n1)
    [[ $pid =~ ^[0-9]+$ ]] || die "no pane pid for $tool"

    sleep "$WARMUP"
    t0=$(now); s0=$(file_size "$out"); c0=$(cpu_ticks "$pid"); d0=$(dir_bytes "$dl")
    [[ -n $c0 && $(pane_field "$sock" '#{pane_dead}') != 1 ]] || {
        echo "tui.sh: $tool exited during warm-up; its screen:" >&2
        timeout 5 tmux -S "$sock" capture-pane -p -t bench >&2 || true
        die "$tool (round $round) did not keep running"
    }
    # One screen shot half way through the window.
    local half=$(( window / 2 )) rest
    rest=$(( window - half ))
    sleep "$half"
    timeout 5 tmux -S "$sock" capture-pane -p -t bench >"$TMP/screen-$tool-$round.txt" 2>/dev/null || true
    sleep "$rest"
    t1=$(now); s1=$(file_size "$out"); c1=$(cpu_ticks "$pid"); d1=$(dir_bytes "$dl")
    dead=$(pane_field "$sock" '#{pane_dead}')
    if [[ -z $c1 || $dead == 1 ]]; then
        echo "tui.sh: $tool exited during the window; its screen:" >&2
        timeout 5 tmux -S "$sock" capture-pane -p -t bench >&2 || true
        die "$tool (round $round) did not keep running"
    fi

    # Stop: q for haul (pauses and quits), then the tmux server (SIGHUP).
    timeout 5 tmux -S "$sock" send-keys -t bench q >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
        [[ $(pane_field "$sock" '#{pane_dead}') == 1 ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    timeout 5 tmux -S "$sock" kill-server >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true

    awk -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v c0="$c0" -v c1="$c1" \
        -v d0="$d0" -v d1="$d1" -v hz="$CLK_TCK" 'BEGIN {
            dt = t1 - t0
            printf "%.1f %.2f %.0f\n", (s1 - s0) / dt, 100 * (c1 - c0) / hz / dt, (d1 - d0) / dt
        }' >>"$TMP/results-$tool"
    printf '  %-10s round %d: %s\n' "$tool" "$round" \
        "$(tail -n1 "$TMP/results-$tool" | awk '{ printf "%8.0f B/s terminal, %5.2f%% CPU, %8.0f B/s downloaded", $1, $2, $3 }')" >&2
    rm -rf "$dl"   # the .part files of 20 downloads add up
}

# ------------------------------------------------------------------ runs ----

echo "haul TUI benchmark: $FILES downloads at $RATE/s each, 120x30 pane," \
     "${DURATION}s window after ${WARMUP}s warm-up, $ROUNDS round(s) per tool" >&2
echo "haul: $HAUL   aria2c: $(command -v "$ARIA2C")   nginx: 127.0.0.1:$PORT$( (( nports > 1 )) && echo "-$(( PORT + nports - 1 ))")" >&2

for round in $(seq 1 "$ROUNDS"); do
    run_one haul "$round" "$DURATION" \
        "HAUL_STATE_DIR=$(printf %q "$TMP/state-haul-$round") $(printf %q "$HAUL") -d $(printf %q "$TMP/dl-haul-$round") -j $FILES$quoted_urls"
    # -Z: each URL is its own download (without it aria2c takes them as
    # mirrors of one file).
    run_one aria2c "$round" "$DURATION" \
        "$(printf %q "$(command -v "$ARIA2C")") -Z -d $(printf %q "$TMP/dl-aria2c-$round") -j $FILES -x 1 --summary-interval=0 --console-log-level=warn --file-allocation=none$quoted_urls"
done
if (( IDLE > 0 )); then
    run_one haul-idle 1 "$IDLE" \
        "HAUL_STATE_DIR=$(printf %q "$TMP/state-haul-idle") $(printf %q "$HAUL") -d $(printf %q "$TMP/dl-haul-idle-1")"
fi

# ----------------------------------------------------------------- table ----

col() { awk -v c="$2" '{ print $c }' "$TMP/results-$1" | median; }

echo
echo "TUI cost, median of $ROUNDS round(s), ${DURATION}s window, $FILES downloads x $RATE/s, 120x30"
echo "(machine: $CORES cores, shared; CPU is % of ONE core)"
printf '%-22s %16s %14s %18s\n' tool 'terminal B/s' 'CPU % 1 core' 'downloaded B/s'
printf '%-22s %16s %14s %18s\n' ---- ------------ ------------ --------------
row() {
    local tool=$1 label=$2
    [[ -s $TMP/results-$tool ]] || return 0
    printf '%-22s %16.0f %14.2f %18.0f\n' "$label" "$(col "$tool" 1)" "$(col "$tool" 2)" "$(col "$tool" 3)"
}
row haul "haul (default UI)"
row aria2c "aria2c (readout)"
(( IDLE > 0 )) && row haul-idle "haul idle (${IDLE}s, 1 run)"
echo
h_bytes=$(col haul 1); h_cpu=$(col haul 2)
awk -v b="$h_bytes" -v c="$h_cpu" 'BEGIN {
    printf "haul targets: terminal <= 6144 B/s: %s (%.0f)   CPU <= 3%%: %s (%.2f)\n",
        (b <= 6144 ? "met" : "MISSED"), b, (c <= 3 ? "met" : "MISSED"), c }'

# Every download should move at the throttled rate; say so when one did not.
expected=$(( FILES * 100 * 1024 ))
for t in haul aria2c; do
    awk -v d="$(col "$t" 3)" -v e="$expected" -v t="$t" -v f="$FILES" 'BEGIN {
        if (d < 0.9 * e)
            printf "NOTE: %s downloaded %.0f B/s, under 90%% of %d x 100 KiB/s = %d B/s: not all %d downloads were transferring (SHOW_SCREEN=1 shows its screen; KEEP=1 keeps its log)\n", t, d, f, e, f }'
done

if [[ $SHOW_SCREEN == 1 && -s $TMP/screen-haul-1.txt ]]; then
    echo
    echo "haul's screen half way through round 1:"
    cat "$TMP/screen-haul-1.txt"
fi
