#!/usr/bin/env bash
# Tests/Benchmarks/bench.sh — haul next to curl, wget2, aria2c and axel.
#
# Not a test: it prints numbers. Every download comes from a private nginx on
# 127.0.0.1 (its config, logs and data in a temp dir, removed on exit).
# Scenarios:
#   a-cache    one 1 GiB random file to disk, left in the page cache
#              (haul --no-fsync, curl, wget2, aria2c -x1, axel -n1)
#   a-durable  the same, made durable: haul by default (it fsyncs before it
#              reports completion), each peer followed by `sync FILE` inside
#              the timed command, and a floor row `cp SRC FILE && sync FILE`
#   b          1,000 files of 100 KiB from an input list, 16 at once
#              (haul -j 16 -i, aria2c -j16 -i, wget2 --max-threads=16 -i,
#              curl -Z --parallel-max 16 -K), and a floor row: the least haul
#              promises, in C (Tests/Benchmarks/durable-floor.c, built with cc:
#              16 threads on kept connections, each file written to NAME.part,
#              fsync'd and renamed), n/a without a C compiler; and a second
#              floor row, floordb: the same with the queue in SQLite as haul
#              keeps it (the same C file built with -DWITH_STORE -lsqlite3:
#              each file's row committed as completed, WAL + synchronous FULL,
#              after its fsync and before its rename, completions that wait
#              together sharing a commit), n/a without SQLite's header. As root, b
#              writes on a file system of its own, made for the run: a 2 GiB
#              image file formatted with mkfs.ext4's defaults (journaled, as
#              Debian installs it), loop-mounted; else (B_DISK=work) in the
#              temp dir. Why: thousands of files written, fsync'd and deleted
#              a minute left this machine's disk (ext4 without a journal,
#              mounted with discard) slower for whichever tool came next, more
#              with each round (curl 0.15 s in a warm-up, 1.02 s five rounds
#              later), which measured the disk's state, not the tools
#   c          one 256 MiB file from /limited/ (nginx limit_rate 2m per
#              connection) over 8 connections (haul --connections 8,
#              aria2c -x8 -s8, axel -n8)
#   d          UI cost: runs Tests/Benchmarks/tui.sh (ROUNDS=--runs, same
#              HAUL) and prints its table under the main one
#   e          the UI on 10,000 rows: runs Tests/Benchmarks/queue10k.sh
#              (ROUNDS=--runs, same HAUL) and prints its figures
# Each run is measured with GNU time (wall, user+sys CPU, peak RSS), after an
# untimed `sync`, into a new empty directory, and verified (exit status 0,
# file sizes; sha256 against the source in the warm-up run of a and c). A
# scenario is 1 warm-up round plus N counted rounds; a round runs every tool
# once, so the tools share the machine's noise, each round starting one tool
# further along the table's order (no tool always runs first). The table
# quotes medians of the counted runs that succeeded; failures show as FAILED.
#
# Run (from the repo root; needs root to apt-get install missing tools and to
# mount b's file system):
#   Tests/Benchmarks/bench.sh [--runs N] [--scenarios a,b,c,d,e]
#   (default: 5 runs, all scenarios; a = a-cache + a-durable, which can also be
#   named alone). Full default run: about 20 minutes on 2 cores (+ the build).
# Environment:
#   HAUL=path     use this haul binary instead of `swift build -c release`
#   REPO=path     repo root (default: two levels above this script)
#   TIMEOUT=300   seconds allowed to each run (a timed-out run is FAILED)
#   B_DISK=image  where b writes: image (its own ext4, as root) or work (the
#                 temp dir's file system)
#   DURATION, IDLE  passed through to tui.sh (scenario d)

set -euo pipefail

RUNS=5
SCENARIOS=a,b,c,d,e
TIMEOUT=${TIMEOUT:-300}
NGINX=${NGINX:-/usr/sbin/nginx}
GNU_TIME=/usr/bin/time

die() { echo "bench.sh: $*" >&2; exit 1; }
say() { echo "$*" >&2; }

while (( $# )); do
    case $1 in
        --runs) RUNS=${2:-}; shift 2 || die "--runs needs a number" ;;
        --runs=*) RUNS=${1#*=}; shift ;;
        --scenarios) SCENARIOS=${2:-}; shift 2 || die "--scenarios needs a list" ;;
        --scenarios=*) SCENARIOS=${1#*=}; shift ;;
        -h|--help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "TIMEOUT must be a positive integer"
SCEN=()
IFS=, read -ra req <<<"$SCENARIOS"
for s in "${req[@]}"; do
    case $s in
        a) SCEN+=(a-cache a-durable) ;;
        a-cache|a-durable|b|c|d|e) SCEN+=("$s") ;;
        *) die "unknown scenario '$s' (a, a-cache, a-durable, b, c, d, e)" ;;
    esac
done
(( ${#SCEN[@]} )) || die "no scenario given"
wants() { [[ " ${SCEN[*]} " == *" $1"* ]]; }
DOWNLOADS=0; if wants a- || wants b || wants c; then DOWNLOADS=1; fi   # they need our nginx

script_dir=$(cd "$(dirname "$0")" && pwd)
REPO=${REPO:-$(cd "$script_dir/../.." && pwd)}

# ----------------------------------------------------------------- tools ----

missing=()   # command:package (tmux: for tui.sh)
for t in curl:curl wget2:wget2 aria2c:aria2 axel:axel "$NGINX:nginx" "$GNU_TIME:time" tmux:tmux; do
    command -v "${t%:*}" >/dev/null || missing+=("${t##*:}")
done
if (( ${#missing[@]} )); then
    [[ $(id -u) == 0 ]] || die "missing: ${missing[*]} (apt-get install -y them, or run as root)"
    say "bench.sh: installing ${missing[*]}"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 \
        || die "apt-get install ${missing[*]} failed"
fi

if [[ -z ${HAUL:-} ]]; then
    say "bench.sh: building haul (swift build -c release --product haul) in $REPO"
    (cd "$REPO" && swift build -c release --product haul) >&2 || die "swift build failed"
    HAUL=$REPO/.build/release/haul
fi
[[ -x $HAUL ]] || die "no haul binary at $HAUL"
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
HAUL_HELP=$("$HAUL" get --help 2>&1) || die "$HAUL get --help failed"
HAS_CONNECTIONS=0; [[ $HAUL_HELP == *--connections* ]] && HAS_CONNECTIONS=1
HAS_INPUT=0; [[ $HAUL_HELP == *--input-file* ]] && HAS_INPUT=1

# ------------------------------------------------------- temp dir, nginx ----

WORK=$(mktemp -d /tmp/haul-bench.XXXXXX)
B_ROOT=''   # the mount point of b's own file system, once mounted
B_WHERE=''  # what the report says of where b wrote
CHILD=''   # pid of the GNU time (or tui.sh timeout) running now
NGINX_PID=''

stop_child() {
    [[ -n $CHILD ]] || return 0
    local p
    # `timeout` leads its own process group: signal the group (tool + children).
    for p in $(pgrep -P "$CHILD" 2>/dev/null || true); do kill -TERM -- "-$p" 2>/dev/null || true; done
    kill -TERM "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
    CHILD=''
}
stop_nginx() {
    [[ -n $NGINX_PID ]] || return 0
    kill -QUIT "$NGINX_PID" 2>/dev/null || true
    for _ in $(seq 1 25); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=''
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    stop_child; stop_nginx
    if [[ -n $B_ROOT ]]; then umount "$B_ROOT" 2>/dev/null || umount -l "$B_ROOT" 2>/dev/null || true; fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

# No tool reads a user config: flags where they have one (curl -q, wget2
# --no-config, aria2c --no-conf), and an empty HOME/XDG_CONFIG_HOME for all
# (haul's config, ~/.axelrc, wget2's HSTS file).
mkdir -p "$WORK/home/.config" "$WORK/out" "$WORK/res" "$WORK/nginx/tmp" \
    "$WORK/www/big" "$WORK/www/small" "$WORK/www/limited"
chmod 755 "$WORK"   # nginx workers may run as another user
TOOL_ENV=(env HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" HAUL_CONFIG= HAUL_STATE_DIR=)

start_nginx() {  # start_nginx PORT
    local user_line=''
    [[ $(id -u) == 0 ]] && user_line='user root;'   # as root, workers can read $WORK
    # One worker: the server uses at most one of the cores.
    cat >"$WORK/nginx/nginx.conf" <<EOF
$user_line
daemon on;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log $WORK/nginx/access.log;
    client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fcgi; uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    etag on;
    keepalive_timeout 30;
    server {
        listen 127.0.0.1:$1;
        root $WORK/www;
        location /limited/ { limit_rate 2m; }
    }
}
EOF
    timeout 10 "$NGINX" -e "$WORK/nginx/error.log" -p "$WORK/nginx/" -c "$WORK/nginx/nginx.conf" \
        >/dev/null 2>&1 || return 1
    for _ in $(seq 1 50); do [[ -s $WORK/nginx/nginx.pid ]] && break; sleep 0.1; done
    NGINX_PID=$(cat "$WORK/nginx/nginx.pid" 2>/dev/null || true)
    [[ -n $NGINX_PID ]]
}

# ------------------------------------------------------------- test data ----

A_SIZE=$((1024 * 1024 * 1024)); B_FILES=1000; B_SIZE=$((100 * 1024)); C_SIZE=$((256 * 1024 * 1024))
(( DOWNLOADS )) && say "bench.sh: generating test data in $WORK/www"
if wants a-; then head -c "$A_SIZE" /dev/urandom >"$WORK/www/big/a.bin"; fi
if wants b; then
    head -c $((B_FILES * B_SIZE)) /dev/urandom \
        | split -b "$B_SIZE" -d -a 4 --additional-suffix=.bin - "$WORK/www/small/f"
fi
if wants c; then head -c "$C_SIZE" /dev/urandom >"$WORK/www/limited/c.bin"; fi
chmod -R a+rX "$WORK/www"
A_SHA=''; C_SHA=''
if wants a-; then A_SHA=$(sha256sum <"$WORK/www/big/a.bin" | cut -d' ' -f1); fi
if wants c; then C_SHA=$(sha256sum <"$WORK/www/limited/c.bin" | cut -d' ' -f1); fi

PORT=''
for (( p = 18800; DOWNLOADS && p < 19000; p++ )); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue   # taken
    if start_nginx "$p"; then PORT=$p; break; fi
done
[[ -n $PORT || $DOWNLOADS == 0 ]] || die "could not start nginx on 127.0.0.1:18800-18999 (see $WORK/nginx/error.log)"
BASE=http://127.0.0.1:$PORT
printf '%s\n' "<html>ok</html>" >"$WORK/www/probe.html"
(( ! DOWNLOADS )) || [[ $(curl -q -sS -f "$BASE/probe.html") == "<html>ok</html>" ]] || die "nginx on $PORT does not serve $WORK/www"

if wants b; then
    for (( i = 0; i < B_FILES; i++ )); do printf '%s/small/f%04d.bin\n' "$BASE" "$i"; done >"$WORK/b-urls.txt"
    sed 's/.*/url = "&"/' "$WORK/b-urls.txt" >"$WORK/b-curl.cfg"
    mapfile -t B_URLS <"$WORK/b-urls.txt"
    # b's own file system (see the top of this file): made and mounted once, for every b run.
    B_WHERE="the temp dir's file system ($(df --output=fstype "$WORK" | tail -n1))"
    if [[ ${B_DISK:-image} == image ]]; then
        why=''
        if [[ $(id -u) != 0 ]]; then why='not root'
        elif ! command -v mkfs.ext4 >/dev/null; then why='no mkfs.ext4'
        elif ! { truncate -s 2G "$WORK/b.img" && mkfs.ext4 -q -F "$WORK/b.img" >&2 && mkdir "$WORK/b-fs"; }; then why='mkfs.ext4 failed'
        elif mount -o loop "$WORK/b.img" "$WORK/b-fs" >&2; then
            B_ROOT=$WORK/b-fs; mkdir "$B_ROOT/out"; chmod 755 "$B_ROOT"
            B_WHERE="its own ext4 (a 2 GiB image, mkfs.ext4's defaults: journaled), loop-mounted"
        else why='mount failed'; fi
        [[ -z $why ]] || say "bench.sh: b writes in the temp dir's file system ($why; B_DISK=work says so quietly)"
    fi
    if command -v cc >/dev/null; then
        cc -O2 -pthread -o "$WORK/durable-floor" "$script_dir/durable-floor.c" >&2 || say "bench.sh: durable-floor.c did not build: its row is n/a"
        cc -O2 -pthread -DWITH_STORE -o "$WORK/durable-floor-db" "$script_dir/durable-floor.c" -lsqlite3 >&2 || say "bench.sh: durable-floor.c with the store did not build (libsqlite3-dev?): the floordb row is n/a"
    fi
fi

# ------------------------------------------------------------ the tools ----

tools_for() {  # the rows of a scenario, haul first; also the order within a round
    case $1 in a-cache) echo haul curl wget2 aria2c axel ;; a-durable) echo haul curl wget2 aria2c axel cp ;;
               b) echo haul aria2c wget2 curl floor floordb ;; c) echo haul aria2c axel ;; esac
}
bytes_for() { case $1 in a-*) echo "$A_SIZE" ;; b) echo $((B_FILES * B_SIZE)) ;; c) echo "$C_SIZE" ;; esac; }

# aria2c defaults kept on purpose: --file-allocation=prealloc (fallocate on
# ext4), --max-connection-per-server=1, --split=5 (-x1 caps a at 1
# connection), --min-split-size=20M; and aria2c fsyncs the file after the
# allocation and at the end (strace), so even in a-cache its file is durable.
# Only its console output is silenced.
ARIA_Q=(-q --console-log-level=warn --summary-interval=0 --download-result=hide)

# n_a SCEN TOOL -> prints why the tool cannot run (nothing if it can).
n_a() {
    [[ $1/$2 == c/haul && $HAS_CONNECTIONS == 0 ]] && echo "n/a: no --connections"
    [[ $1/$2 == b/floor && ! -x $WORK/durable-floor ]] && echo "n/a: no C compiler (cc)"
    [[ $1/$2 == b/floordb && ! -x $WORK/durable-floor-db ]] && echo "n/a: not built (cc, libsqlite3-dev)"
    return 0
}

# build_cmd SCEN TOOL RUNDIR -> CMD array. Downloads go to RUNDIR/dl.
build_cmd() {
    local scen=$1 tool=$2 rd=$3 dl=$3/dl url='' name=''
    case $scen in
        a-*) name=a.bin url=$BASE/big/a.bin ;;
        c) name=c.bin url=$BASE/limited/c.bin ;;
    esac
    local f=$dl/$name
    case $scen/$tool in
        a-cache/haul) CMD=("$HAUL" get --state "$rd/state" --no-fsync -d "$dl" -o "$name" "$url") ;;
        a-durable/haul) CMD=("$HAUL" get --state "$rd/state" -d "$dl" -o "$name" "$url") ;;
        a-*/curl) CMD=(curl -q -sS -f -o "$f" "$url") ;;
        a-*/wget2) CMD=(wget2 --no-config -q -O "$f" "$url") ;;
        a-*/aria2c) CMD=(aria2c --no-conf -x1 "${ARIA_Q[@]}" -d "$dl" -o "$name" "$url") ;;
        a-*/axel) CMD=(axel -q -n1 -o "$f" "$url") ;;
        a-durable/cp) CMD=(cp -- "$WORK/www/big/a.bin" "$f") ;;
        b/haul)
            if (( HAS_INPUT )); then CMD=("$HAUL" get --state "$rd/state" -j 16 -i "$WORK/b-urls.txt" -d "$dl")
            else CMD=("$HAUL" get --state "$rd/state" -j 16 -d "$dl" "${B_URLS[@]}"); fi ;;
        b/aria2c) CMD=(aria2c --no-conf -j16 "${ARIA_Q[@]}" -i "$WORK/b-urls.txt" -d "$dl") ;;
        b/wget2) CMD=(wget2 --no-config -q --max-threads=16 -nd -i "$WORK/b-urls.txt" -P "$dl") ;;
        b/curl) CMD=(curl -q -sS -f -Z --parallel-max 16 --remote-name-all --output-dir "$dl" -K "$WORK/b-curl.cfg") ;;
        b/floor) CMD=(sh -c 'cd "$1" && shift && exec "$@"' sh "$dl" "$WORK/durable-floor" "$PORT" "$WORK/b-urls.txt") ;;
        b/floordb) CMD=(sh -c 'cd "$1" && shift && exec "$@"' sh "$dl" "$WORK/durable-floor-db" "$PORT" "$WORK/b-urls.txt" 1 "$rd/queue.sqlite") ;;
        c/haul) CMD=("$HAUL" get --state "$rd/state" --connections 8 -d "$dl" -o "$name" "$url") ;;
        c/aria2c) CMD=(aria2c --no-conf -x8 -s8 "${ARIA_Q[@]}" -d "$dl" -o "$name" "$url") ;;
        c/axel) CMD=(axel -q -n8 -o "$f" "$url") ;;
        *) die "internal: no command for $scen/$tool" ;;
    esac
    # a-durable: a peer's file is made durable inside the timed command.
    if [[ $scen == a-durable && $tool != haul ]]; then
        CMD=(sh -c 'f=$1; shift; "$@" && sync -- "$f"' sh "$f" "${CMD[@]}")
    fi
}

# verify SCEN RUNDIR WARMUP -> prints a reason when the output is wrong.
verify() {
    local scen=$1 dl=$2/dl warm=$3 f n bad
    case $scen in
        a-*|c)
            f=$dl/a.bin; [[ $scen == c ]] && f=$dl/c.bin
            [[ -f $f ]] || { echo "no $(basename "$f")"; return; }
            n=$(stat -c %s "$f")
            [[ $n == "$(bytes_for "$scen")" ]] || { echo "size $n"; return; }
            n=$(find "$dl" -mindepth 1 | wc -l)
            [[ $n == 1 ]] || { echo "$n entries in dl/ (leftovers)"; return; }
            if [[ $warm == 1 ]]; then
                local want=$A_SHA; [[ $scen == c ]] && want=$C_SHA
                [[ $(sha256sum <"$f" | cut -d' ' -f1) == "$want" ]] || echo "sha256 differs"
            fi ;;
        b)
            [[ -d $dl ]] || { echo "no dl/"; return; }
            n=$(find "$dl" -mindepth 1 | wc -l)
            bad=$(find "$dl" -mindepth 1 \( ! -type f -o ! -size "${B_SIZE}c" -o ! -name 'f[0-9][0-9][0-9][0-9].bin' \) | wc -l)
            [[ $n == "$B_FILES" && $bad == 0 ]] || echo "$n entries in dl/, $bad wrong (size, name or subdir)" ;;
    esac
}

# run_one SCEN TOOL ROUND -> appends "ok wall user sys rss_kib" (ok: 1/0) to
# $WORK/res/SCEN.TOOL (round 0, the warm-up: to SCEN.TOOL.warm).
run_one() {
    local scen=$1 tool=$2 round=$3 rd rc=0 why='' line wall=0 usr=0 sys=0 rss=0 res
    rd=$WORK/out/$scen-$tool-$round
    [[ $scen == b && -n $B_ROOT ]] && rd=$B_ROOT/out/$scen-$tool-$round
    mkdir "$rd" "$rd/dl"   # fails if it exists: every run gets a new empty dir
    build_cmd "$scen" "$tool" "$rd"
    sync
    "$GNU_TIME" -f '%e %U %S %M' -o "$rd/time" timeout -k 10 "$TIMEOUT" "${TOOL_ENV[@]}" "${CMD[@]}" \
        >"$rd/log" 2>&1 </dev/null &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=''
    line=$(tail -n1 "$rd/time" 2>/dev/null || true)
    if [[ $line =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9]+$ ]]; then read -r wall usr sys rss <<<"$line"; fi
    if (( rc == 124 )); then why="timed out after ${TIMEOUT}s"
    elif (( rc != 0 )); then why="exit status $rc"
    else why=$(verify "$scen" "$rd" "$(( round == 0 ))"); fi
    res=$WORK/res/$scen.$tool; (( round == 0 )) && res+=.warm
    if [[ -z $why ]]; then
        echo "1 $wall $usr $sys $rss" >>"$res"
        say "$(printf '  %-9s %-8s %-8s %7.2f s wall %6.2f s CPU  ok' "$scen" "$tool" \
            "$([[ $round == 0 ]] && echo warm-up || echo "run $round")" "$wall" "$(awk "BEGIN{print $usr+$sys}")")"
    else
        echo "0 $wall $usr $sys $rss $why" >>"$res"
        say "  $scen $tool round $round FAILED: $why (log: $(tail -n3 "$rd/log" | tr '\n' ' '))"
    fi
    rm -rf "$rd/dl" "$rd/state"   # untimed; the log and time files stay
}

run_scenario() {
    local scen=$1 round tool
    say "bench.sh: scenario $scen: 1 warm-up round + $RUNS counted"
    local tools i n
    read -ra tools <<<"$(tools_for "$scen")"
    n=${#tools[@]}
    for (( round = 0; round <= RUNS; round++ )); do
        # Each round starts one tool further along, so no tool always runs first: the first run
        # after the test data was written (the warm-up's first) took 2.1–3.2 s in six of nine
        # runs of a 1 GiB file, for haul or (put first) for wget2, against 0.4–0.7 s later on.
        for (( i = 0; i < n; i++ )); do
            tool=${tools[(round + i) % n]}
            [[ -n $(n_a "$scen" "$tool") ]] && continue
            run_one "$scen" "$tool" "$round"
        done
    done
}

run_script() {  # scenarios d and e: SCRIPT under Tests/Benchmarks, its output kept for the report
    local scen=$1 name=$2 limit=$3 rc=0 script=$script_dir/$2
    [[ -f $script ]] || script=$REPO/Tests/Benchmarks/$name
    [[ -f $script ]] || { echo "FAILED: no $name next to bench.sh or in $REPO" >"$WORK/res/$scen.out"; return; }
    say "bench.sh: scenario $scen: $script (ROUNDS=$RUNS)"
    sync
    timeout -k 10 "$limit" "${TOOL_ENV[@]}" HAUL="$HAUL" ROUNDS="$RUNS" \
        bash "$script" >"$WORK/res/$scen.out" </dev/null &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=''
    (( rc == 0 )) || echo "FAILED: $name exit status $rc (its messages are above, on stderr)" >>"$WORK/res/$scen.out"
}

# ------------------------------------------------------------------ runs ----

# Every tool's program and libraries start as an installed program's do: read from disk, not
# cached as they were written. A file the linker, `cp` or apt-get just wrote sits in the page
# cache in large folios, and the kernel maps a process more of such a file around each page it
# touches: one haul download peaked at 31.4 and 32.3 MiB right after a `cp` of its binary, at
# 29.1 MiB twice once the binary's cached pages were dropped. Dropping them (`dd iflag=nocache`)
# costs each program one read from disk, in its warm-up run.
for prog in "$HAUL" curl wget2 aria2c axel "$WORK/durable-floor" "$WORK/durable-floor-db"; do
    prog=$(command -v "$prog" 2>/dev/null) || continue
    for f in "$prog" $(ldd "$prog" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
        dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true
    done
done

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$SECONDS
for s in "${SCEN[@]}"; do
    case $s in
        d) run_script d tui.sh $(( 900 + RUNS * 200 )) ;;
        e) run_script e queue10k.sh $(( 300 + RUNS * 120 )) ;;
        *) run_scenario "$s" ;;
    esac
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
stop_nginx

# ---------------------------------------------------------------- report ----

# stats FILE -> "ok_count med_wall med_cpu med_rss_mib min_wall max_wall"
stats() {
    awk 'function med(a, n,   i, j, t) {
             for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
             return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
         $1 == 1 { n++; w[n] = $2; c[n] = $3 + $4; r[n] = $5 / 1024
                   if (n == 1 || $2 < lo) lo = $2; if (n == 1 || $2 > hi) hi = $2 }
         END { if (n == 0) { print 0; exit }
               printf "%d %s %s %s %s %s\n", n, med(w, n), med(c, n), med(r, n), lo, hi }' "$1"
}

echo "# haul benchmark ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "- kernel: $(uname -r), cores: $(nproc), runs: $RUNS counted + 1 warm-up per scenario, runs took $(( SECONDS - T0 )) s"
echo "- load average at start: $LOAD_START, at end: $LOAD_END"
echo "- haul: $HAUL ($("$HAUL" --version 2>&1 | head -n1)$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null | sed 's/^/, repo at /' || true))"
echo "- curl: $(curl --version | head -n1 | cut -d' ' -f1-2)"
echo "- wget2: $(wget2 --version 2>&1 | head -n1)"
echo "- aria2c: $(aria2c --version | head -n1)"
echo "- axel: $(axel --version 2>&1 | head -n1)"
download_report() {  # the spread, the table and its notes (scenarios a-c)
echo "- nginx: $("$NGINX" -v 2>&1 | head -n1 | sed 's/.*: //') on 127.0.0.1, sendfile on, 1 worker; /limited/ at limit_rate 2m"
[[ -n $B_WHERE ]] && echo "- b wrote on $B_WHERE"
echo
echo "Spread (min-max wall s of the counted runs):"
for s in "${SCEN[@]}"; do
    [[ $s == d ]] && continue
    line=''
    for t in $(tools_for "$s"); do
        [[ -f $WORK/res/$s.$t ]] || continue
        read -r n _ _ _ lo hi <<<"$(stats "$WORK/res/$s.$t")"
        (( n > 0 )) && line+=" $t $lo-$hi;"
    done
    echo "- $s:${line%;}"
done
echo
ROW='| %-9s | %-7s | %-28s | %6s | %7s | %6s | %8s | %14s | %13s |\n'
printf "$ROW" scenario tool 'runs ok' 'wall s' 'MB/s' 'CPU s' 'RSS MiB' 'haul/peer wall' 'haul/peer CPU'
echo "|-----------|---------|------------------------------|-------:|--------:|-------:|---------:|---------------:|--------------:|"
for s in "${SCEN[@]}"; do
    [[ $s == d ]] && continue
    bytes=$(bytes_for "$s"); hw=''; hc=''
    for t in $(tools_for "$s"); do
        na=$(n_a "$s" "$t")
        if [[ -n $na ]]; then
            printf "$ROW" "$s" "$t" "$na" - - - - - -
            continue
        fi
        read -r n w c r _ _ <<<"$(stats "$WORK/res/$s.$t")"
        ok="$n/$RUNS"; (( n < RUNS )) && ok+=" FAILED $(( RUNS - n ))"
        grep -q '^0' "$WORK/res/$s.$t.warm" 2>/dev/null && ok+=", warm-up FAILED"
        if (( n == 0 )); then
            printf "$ROW" "$s" "$t" "$ok" FAILED - - - - -
            continue
        fi
        [[ $t == haul ]] && { hw=$w; hc=$c; }
        read -r mbs rw rc <<<"$(awk -v b="$bytes" -v w="$w" -v c="$c" -v hw="$hw" -v hc="$hc" 'BEGIN {
            printf "%.1f %s %s\n", b / w / 1e6, (hw == "" ? "-" : sprintf("%.2f", hw / w)),
                   (hc == "" ? "-" : (c > 0 ? sprintf("%.2f", hc / c) : "-")) }')"
        printf '| %-9s | %-7s | %-28s | %6.2f | %7s | %6.2f | %8.1f | %14s | %13s |\n' "$s" "$t" "$ok" "$w" "$mbs" "$c" "$r" "$rw" "$rc"
    done
done
echo
echo "Medians of the counted runs that succeeded; MB/s = bytes / median wall / 1e6; CPU = user + sys"
echo "of the whole command (a-durable peers: tool + sync); RSS = peak resident set of the largest process."
(( HAS_INPUT )) || ! wants b || echo "Note: this haul has no -i/--input-file: in b it got the 1,000 URLs as arguments."
echo "Note: haul fsyncs each file by default (b, c, a-durable); of the peers only aria2c does (always, even in a-cache)."
! wants b || echo "Note: b's floors are not peers (no client: plain 200s from nginx only); haul/floor is what haul's own work costs above the file system's, haul/floordb above the file system's and the store's (each row committed as completed, in C)."
for f in "$WORK"/res/*; do   # failure reasons, so a FAILED cell can be explained
    [[ -f $f && $f != *d.out && $f != *e.out ]] || continue
    awk -v n="$(basename "$f")" '$1 == 0 { $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print "FAILED run of " n ": " $0 }' "$f"
done
}
if (( DOWNLOADS )); then download_report; fi
for scen in d e; do   # the scripts' own reports, under the table
    wants "$scen" || continue
    echo
    case $scen in
        d) echo "## d: UI cost (Tests/Benchmarks/tui.sh, ROUNDS=$RUNS, same haul)" ;;
        e) echo "## e: the UI on 10,000 rows (Tests/Benchmarks/queue10k.sh, ROUNDS=$RUNS, same haul)" ;;
    esac
    echo
    echo '```'
    sed '/./,$!d' "$WORK/res/$scen.out"   # without its leading blank line
    echo '```'
done
