# Tests/Benchmarks/throttled-nginx.sh — sourced by tui.sh and attach.sh, not run.
#
# Makes a temp dir ($TMP, removed on exit unless KEEP=1, with every tmux server
# in SOCKETS killed), starts a private nginx on 127.0.0.1:18500+ serving $FILES
# sparse files of $FILE_SIZE bytes at $RATE each (one port, or one per file with
# SPREAD=1), sets URLS and quoted_urls, and defines the helpers both benchmarks
# use (cpu_ticks, file_size, dir_bytes, now, pane_field, median).
# Expects: BENCH (the script's name, for messages), FILES, FILE_SIZE, RATE,
# NGINX, KEEP, SPREAD, HAUL, ROUNDS and DURATION; checks them and what both need (tmux, nginx,
# /proc), and defines die(), CLK_TCK, CORES and BENCH_LANG.

die() { echo "$BENCH: $*" >&2; exit 1; }

if [[ ! -x $HAUL ]]; then
    echo "$BENCH: no haul binary at $HAUL" >&2
    echo "$BENCH: run \`swift build -c release\` first (or set HAUL=path)" >&2
    exit 1
fi
HAUL=$(cd "$(dirname "$HAUL")" && pwd)/$(basename "$HAUL")
command -v tmux >/dev/null || die "tmux not found"
[[ -x $NGINX ]] || die "nginx not found at $NGINX (set NGINX=path)"
[[ -r /proc/self/stat ]] || die "needs Linux /proc"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive integer"

CLK_TCK=$(getconf CLK_TCK)
CORES=$(nproc 2>/dev/null || echo '?')
# haul draws UTF-8 bars in a UTF-8 locale, as most users have.
BENCH_LANG=C.UTF-8
locale -a 2>/dev/null | grep -qix 'c.utf-\?8' || BENCH_LANG=${LANG:-C}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/haul-${BENCH%.sh}-bench.XXXXXX")
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
        echo "$BENCH: kept $TMP" >&2
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
