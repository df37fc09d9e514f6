#compdef haul

__haul_complete() {
    local -ar non_empty_completions=("${@:#(|:*)}")
    local -ar empty_completions=("${(M)@:#(|:*)}")
    _describe -V '' non_empty_completions -- empty_completions -P $'\'\''
}

__haul_custom_complete() {
    local -a completions
    completions=("${(@f)"$("${command_name}" "${@}" "${command_line[@]}")"}")
    if [[ "${#completions[@]}" -gt 1 ]]; then
        __haul_complete "${completions[@]:0:-1}"
    fi
}

__haul_cursor_index_in_current_word() {
    if [[ -z "${QIPREFIX}${IPREFIX}${PREFIX}" ]]; then
        printf 0
    else
        printf %s "${#${(z)LBUFFER}[-1]}"
    fi
}

_haul() {
    emulate -RL zsh -G
    setopt extendedglob nullglob numericglobsort
    unsetopt aliases banghist

    local -xr SAP_SHELL=zsh
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(builtin emulate zsh -c 'printf %s "${ZSH_VERSION}"')"
    local -r SAP_SHELL_VERSION

    local context state state_descr line
    local -A opt_args

    local -r command_name="${words[1]}"
    local -ar command_line=("${words[@]}")
    local -ir current_word_index="$((CURRENT - 1))"

    local -i ret=1
    local -ar arg_specs=(
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
        '(-): :->command'
        '(-)*:: :->arg'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0
    case "${state}" in
    command)
        local -ar subcommands=(
            'ui:Open the terminal UI on the queue (the default: `haul` and `haul URL...` run this).'
            'get:Download URLs headless, printing one line per state change.'
            'add:Add URLs to the queue without downloading them yet.'
            'list:Print the queue: state, bytes, total, resume offset, path, URL and error of each download.'
            'pause:Pause downloads by id (bytes kept); they stay paused when haul next runs the queue.'
            'resume:Queue paused or failed downloads again by id; the next haul resumes them from their bytes.'
            'cancel:Cancel downloads by id and delete their partial data (the only command that discards bytes).'
            'remove:Forget completed, failed or cancelled downloads by id; their files stay.'
            'start:Run the queue in the background, without a terminal; haul attaches to it, haul stop ends it.'
            'stop:Stop the queue'\''s runner: pause everything, checkpoint, and wait for it to exit.'
            'demo:Try haul offline: a local server with a dozen sample downloads, in the terminal UI.'
            'help:Show subcommand help information.'
        )
        _describe -V subcommand subcommands && ret=0
        ;;
    arg)
        case "${words[1]}" in
        ui|get|add|list|pause|resume|cancel|remove|start|stop|demo|help)
            "_haul_${words[1]}" && ret=0
            ;;
        esac
        ;;
    esac

    return "${ret}"
}

_haul_ui() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:urls:'
        '(-i --input-file)'{-i,--input-file}'[Also the URLs listed in FILE (one per line, # comments).]:file:'
        '(-d --dir)'{-d,--dir}'[Directory for downloads named by the server or the URL (default\: dir in the config, else the current directory).]:dir:'
        '(-o --output)'{-o,--output}'[Write the single URL'\''s download to FILE (relative to -d).]:file:'
        '*'{-H,--header}'[Send this header with every request of these downloads (repeatable; kept with each download).]:name\: value:'
        '--user-agent[User-Agent for these downloads (and the default of this run).]:text:'
        '--connections[Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.]:n:'
        '--checksum[Verify the single download at completion\: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.]:algo=hex:'
        '--limit-rate-each[Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.]:rate:'
        '(-j --max-active)'{-j,--max-active}'[How many downloads run at once, 1 to 32 (default\: max-active in the config, else what < and > last chose, else 3).]:n:'
        '--max-tries[Failed attempts in a row before a download fails (default 20).]:n:'
        '--connect-timeout[Seconds to wait for a connection (default 10).]:s:'
        '--stall-timeout[Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).]:s:'
        '--limit-rate[Limit all downloads together to RATE bytes a second\: 500K, 2M (K = 1024); for this run (default\: limit-rate in the config, else the limit last set while the queue ran).]:rate:'
        '--ca-certificate[Trust only the CA certificates in this PEM FILE (replaces the system'\''s, like curl --cacert).]:file:'
        '--fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--no-fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--allow-downgrade[Follow a redirect from https to http (refused by default\: the rest would travel unencrypted).]'
        '--min-free[Free space to keep where downloads go\: under it they wait, bytes kept, and go on when there is room (default\: 1G or 1% of the file system, whichever is smaller; 0\: only a full disk stops them).]:size:'
        '--purge-when-low[When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).]'
        '--on-complete[Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--on-fail[Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--hook-timeout[Kill a hook still running after this long, with its children\: 30s, 10m, 1h or seconds (default 10m).]:duration:'
        '--refresh[Most redraws a second, 1 to 10 (default 10).]:hz:'
        '--ascii[Draw bars and marks in ASCII (automatic when the locale is not UTF-8).]'
        '--no-ascii[Draw bars and marks in ASCII (automatic when the locale is not UTF-8).]'
        '--mouse[Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.]'
        '--no-mouse[Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_get() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:urls:'
        '(-i --input-file)'{-i,--input-file}'[Also the URLs listed in FILE (one per line, # comments).]:file:'
        '(-d --dir)'{-d,--dir}'[Directory for downloads named by the server or the URL (default\: dir in the config, else the current directory).]:dir:'
        '(-o --output)'{-o,--output}'[Write the single URL'\''s download to FILE (relative to -d).]:file:'
        '*'{-H,--header}'[Send this header with every request of these downloads (repeatable; kept with each download).]:name\: value:'
        '--user-agent[User-Agent for these downloads (and the default of this run).]:text:'
        '--connections[Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.]:n:'
        '--checksum[Verify the single download at completion\: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.]:algo=hex:'
        '--limit-rate-each[Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.]:rate:'
        '(-j --max-active)'{-j,--max-active}'[How many downloads run at once, 1 to 32 (default\: max-active in the config, else what < and > last chose, else 3).]:n:'
        '--max-tries[Failed attempts in a row before a download fails (default 20).]:n:'
        '--connect-timeout[Seconds to wait for a connection (default 10).]:s:'
        '--stall-timeout[Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).]:s:'
        '--limit-rate[Limit all downloads together to RATE bytes a second\: 500K, 2M (K = 1024); for this run (default\: limit-rate in the config, else the limit last set while the queue ran).]:rate:'
        '--ca-certificate[Trust only the CA certificates in this PEM FILE (replaces the system'\''s, like curl --cacert).]:file:'
        '--fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--no-fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--allow-downgrade[Follow a redirect from https to http (refused by default\: the rest would travel unencrypted).]'
        '--min-free[Free space to keep where downloads go\: under it they wait, bytes kept, and go on when there is room (default\: 1G or 1% of the file system, whichever is smaller; 0\: only a full disk stops them).]:size:'
        '--purge-when-low[When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).]'
        '--on-complete[Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--on-fail[Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--hook-timeout[Kill a hook still running after this long, with its children\: 30s, 10m, 1h or seconds (default 10m).]:duration:'
        '--json[Print one JSON object per event instead of text.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_add() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:urls:'
        '(-i --input-file)'{-i,--input-file}'[Also the URLs listed in FILE (one per line, # comments).]:file:'
        '(-d --dir)'{-d,--dir}'[Directory for downloads named by the server or the URL (default\: dir in the config, else the current directory).]:dir:'
        '(-o --output)'{-o,--output}'[Write the single URL'\''s download to FILE (relative to -d).]:file:'
        '*'{-H,--header}'[Send this header with every request of these downloads (repeatable; kept with each download).]:name\: value:'
        '--user-agent[User-Agent for these downloads (and the default of this run).]:text:'
        '--connections[Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.]:n:'
        '--checksum[Verify the single download at completion\: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.]:algo=hex:'
        '--limit-rate-each[Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.]:rate:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_list() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '--json[Print a JSON array, one object per download.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_pause() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:ids:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_resume() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:ids:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_cancel() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:ids:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_remove() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:ids:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_start() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '*:urls:'
        '(-i --input-file)'{-i,--input-file}'[Also the URLs listed in FILE (one per line, # comments).]:file:'
        '(-d --dir)'{-d,--dir}'[Directory for downloads named by the server or the URL (default\: dir in the config, else the current directory).]:dir:'
        '(-o --output)'{-o,--output}'[Write the single URL'\''s download to FILE (relative to -d).]:file:'
        '*'{-H,--header}'[Send this header with every request of these downloads (repeatable; kept with each download).]:name\: value:'
        '--user-agent[User-Agent for these downloads (and the default of this run).]:text:'
        '--connections[Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.]:n:'
        '--checksum[Verify the single download at completion\: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.]:algo=hex:'
        '--limit-rate-each[Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.]:rate:'
        '(-j --max-active)'{-j,--max-active}'[How many downloads run at once, 1 to 32 (default\: max-active in the config, else what < and > last chose, else 3).]:n:'
        '--max-tries[Failed attempts in a row before a download fails (default 20).]:n:'
        '--connect-timeout[Seconds to wait for a connection (default 10).]:s:'
        '--stall-timeout[Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).]:s:'
        '--limit-rate[Limit all downloads together to RATE bytes a second\: 500K, 2M (K = 1024); for this run (default\: limit-rate in the config, else the limit last set while the queue ran).]:rate:'
        '--ca-certificate[Trust only the CA certificates in this PEM FILE (replaces the system'\''s, like curl --cacert).]:file:'
        '--fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--no-fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--allow-downgrade[Follow a redirect from https to http (refused by default\: the rest would travel unencrypted).]'
        '--min-free[Free space to keep where downloads go\: under it they wait, bytes kept, and go on when there is room (default\: 1G or 1% of the file system, whichever is smaller; 0\: only a full disk stops them).]:size:'
        '--purge-when-low[When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).]'
        '--on-complete[Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--on-fail[Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--hook-timeout[Kill a hook still running after this long, with its children\: 30s, 10m, 1h or seconds (default 10m).]:duration:'
        '--foreground[Run in this process (for systemd and other service managers) instead of in the background.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_stop() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_demo() {
    local -i ret=1
    local -ar arg_specs=(
        '--state[Directory of the queue, its database and haul.log (default\: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).]:dir:'
        '--config[Read settings from FILE (default\: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).]:file:'
        '(-d --dir)'{-d,--dir}'[Directory for the sample files (default\: downloads/ in the state directory).]:dir:'
        '(-j --max-active)'{-j,--max-active}'[How many downloads run at once, 1 to 32 (default\: max-active in the config, else what < and > last chose, else 3).]:n:'
        '--max-tries[Failed attempts in a row before a download fails (default 20).]:n:'
        '--connect-timeout[Seconds to wait for a connection (default 10).]:s:'
        '--stall-timeout[Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).]:s:'
        '--limit-rate[Limit all downloads together to RATE bytes a second\: 500K, 2M (K = 1024); for this run (default\: limit-rate in the config, else the limit last set while the queue ran).]:rate:'
        '--ca-certificate[Trust only the CA certificates in this PEM FILE (replaces the system'\''s, like curl --cacert).]:file:'
        '--fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--no-fsync[fsync each file before it is reported completed (default; --no-fsync for scratch downloads).]'
        '--allow-downgrade[Follow a redirect from https to http (refused by default\: the rest would travel unencrypted).]'
        '--min-free[Free space to keep where downloads go\: under it they wait, bytes kept, and go on when there is room (default\: 1G or 1% of the file system, whichever is smaller; 0\: only a full disk stops them).]:size:'
        '--purge-when-low[When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).]'
        '--on-complete[Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--on-fail[Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).]:program:'
        '--hook-timeout[Kill a hook still running after this long, with its children\: 30s, 10m, 1h or seconds (default 10m).]:duration:'
        '--refresh[Most redraws a second, 1 to 10 (default 10).]:hz:'
        '--ascii[Draw bars and marks in ASCII (automatic when the locale is not UTF-8).]'
        '--no-ascii[Draw bars and marks in ASCII (automatic when the locale is not UTF-8).]'
        '--mouse[Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.]'
        '--no-mouse[Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.]'
        '--version[Show the version.]'
        '(-h --help)'{-h,--help}'[Show help information.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

_haul_help() {
    local -i ret=1
    local -ar arg_specs=(
        '*:subcommands:'
        '--version[Show the version.]'
    )
    _arguments -w -s -S : "${arg_specs[@]}" && ret=0

    return "${ret}"
}

if [[ "${funcstack[1]}" = _haul ]]; then
    _haul "${@}"
else
    compdef _haul haul
fi
