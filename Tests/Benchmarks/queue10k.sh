#!/usr/bin/env bash
# Tests/Benchmarks/queue10k.sh — haul's terminal UI on a queue of 10,000 rows
# (row 14 of the README's fault matrix).
#
# Not a test: it prints numbers. It adds ROWS URLs to a fresh queue (`haul add
# -i`), pauses them all (`haul pause`, so nothing downloads and the picture
# holds still), then, ROUNDS times, opens the terminal UI in a private tmux
# server (100x30) and measures:
#   - first frame: from starting haul to the first screen that shows rows;
#   - PageDown: PRESSES presses, each timed from the key to the screen
#     that shows the next page (median and max);
#   - End: the key to the last row on screen;
#   - peak RSS (VmHWM) and CPU seconds of the UI process, read before it quits.
# Medians over the rounds are printed. Targets: first frame under 1 s, memory
# under 100 MiB, scrolling that keeps up with the keys.
#
# Run (from the repo root):
#   swift build -c release && Tests/Benchmarks/queue10k.sh
# Environment:
#   HAUL=path      haul binary (default: .build/release/haul of this repo)
#   ROWS=10000     downloads in the queue
#   ROUNDS=5       UI starts measured (median quoted)
#   PRESSES=40     PageDown presses per round
#   KEEP=1         keep the temp dir
# Needs: tmux, awk, Linux /proc.

set -euo pipefail

ROWS=${ROWS:-10000}
ROUNDS=${ROUNDS:-5}
PRESSES=${PRESSES:-40}
KEEP=${KEEP:-0}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)
HAUL=${HAUL:-$repo_root/.build/release/haul}

die() { echo "queue10k.sh: $*" >&2; exit 1; }
[[ -x $HAUL ]] || die "no haul binary at $HAUL (swift build -c release first, or set HAUL)"
command -v tmux >/dev/null || die "tmux is needed (apt-get install -y tmux)"

WORK=$(mktemp -d /tmp/haul-q10k.XXXXXX)
SOCKET=$WORK/tmux.sock
cleanup() {
    tmux -S "$SOCKET" kill-server 2>/dev/null || true
    if (( KEEP )); then echo "queue10k.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
screen() { tmux -S "$SOCKET" capture-pane -p -t q 2>/dev/null || true; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# 10,000 URLs on a port nothing listens on: they never download, whatever happens.
for i in $(seq 1 "$ROWS"); do echo "http://127.0.0.1:9/queue/f$i.bin"; done >"$WORK/list.txt"
mkdir -p "$WORK/dl"
t0=$(now_ms)
HAUL_STATE_DIR=$WORK/state "$HAUL" add -i "$WORK/list.txt" -d "$WORK/dl" >/dev/null
add_ms=$(( $(now_ms) - t0 ))
t0=$(now_ms)
seq 1 "$ROWS" | HAUL_STATE_DIR=$WORK/state xargs "$HAUL" pause >/dev/null
pause_ms=$(( $(now_ms) - t0 ))

: >"$WORK/first"; : >"$WORK/page"; : >"$WORK/end"; : >"$WORK/rss"; : >"$WORK/cpu"
for round in $(seq 1 "$ROUNDS"); do
    t0=$(now_ms)
    tmux -S "$SOCKET" -f /dev/null new-session -d -s q -x 100 -y 30 \
        "exec env HAUL_STATE_DIR='$WORK/state' LC_ALL=C.UTF-8 TERM=tmux-256color '$HAUL'"
    pid=$(tmux -S "$SOCKET" list-panes -t q -F '#{pane_pid}')
    until screen | grep -q 'f1\.bin'; do
        (( $(now_ms) - t0 < 20000 )) || die "round $round: no rows on screen after 20 s"
        sleep 0.005
    done
    echo $(( $(now_ms) - t0 )) >>"$WORK/first"
    for _ in $(seq 1 "$PRESSES"); do
        before=$(screen)
        t0=$(now_ms)
        tmux -S "$SOCKET" send-keys -t q NPage
        while [[ $(screen) == "$before" ]]; do
            (( $(now_ms) - t0 < 5000 )) || die "round $round: PageDown changed nothing in 5 s"
            sleep 0.002
        done
        echo $(( $(now_ms) - t0 )) >>"$WORK/page"
    done
    t0=$(now_ms)
    tmux -S "$SOCKET" send-keys -t q End
    until screen | grep -q "f$ROWS\.bin"; do
        (( $(now_ms) - t0 < 5000 )) || die "round $round: End did not reach the last row in 5 s"
        sleep 0.002
    done
    echo $(( $(now_ms) - t0 )) >>"$WORK/end"
    awk '/^VmHWM:/ { printf "%.1f\n", $2 / 1024 }' "/proc/$pid/status" >>"$WORK/rss"
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / hz }' "/proc/$pid/stat" >>"$WORK/cpu"
    tmux -S "$SOCKET" send-keys -t q q
    for _ in $(seq 1 500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
    kill -0 "$pid" 2>/dev/null && die "round $round: haul did not quit on q"
    tmux -S "$SOCKET" kill-server 2>/dev/null || true
done

echo
echo "haul UI on a queue of $ROWS paused rows, 100x30 tmux pane, $ROUNDS rounds ($PRESSES PageDowns each)"
echo "  haul add -i ($ROWS URLs):      $add_ms ms"
echo "  haul pause ($ROWS ids):        $pause_ms ms"
echo "  first frame with rows:         median $(median <"$WORK/first") ms   (all: $(tr '\n' ' ' <"$WORK/first"))"
echo "  PageDown to the next page:     median $(median <"$WORK/page") ms, max $(sort -n "$WORK/page" | tail -n1) ms"
echo "  End to the last row:           median $(median <"$WORK/end") ms"
echo "  peak RSS of the UI:            median $(median <"$WORK/rss") MiB   (all: $(tr '\n' ' ' <"$WORK/rss"))"
echo "  CPU of the UI (whole round):   median $(median <"$WORK/cpu") s"
echo "Times include tmux's capture-pane polling (a few ms)."
