function __haul_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __haul_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __haul_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __haul_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __haul_parse_tokens -S
    set -l unparsed_tokens (__haul_tokens -pc)
    switch $unparsed_tokens[1]
    case 'haul'
        __haul_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'ui'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'i/input-file=' 'd/dir=' 'o/output=' 'H/header=+' 'user-agent=' 'connections=' 'checksum=' 'limit-rate-each=' 'j/max-active=' 'max-tries=' 'connect-timeout=' 'stall-timeout=' 'limit-rate=' 'ca-certificate=' 'fsync' 'no-fsync' 'allow-downgrade' 'min-free=' 'purge-when-low' 'on-complete=' 'on-fail=' 'hook-timeout=' 'refresh=' 'ascii' 'no-ascii' 'mouse' 'no-mouse' 'version' 'h/help'
        case 'get'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'i/input-file=' 'd/dir=' 'o/output=' 'H/header=+' 'user-agent=' 'connections=' 'checksum=' 'limit-rate-each=' 'j/max-active=' 'max-tries=' 'connect-timeout=' 'stall-timeout=' 'limit-rate=' 'ca-certificate=' 'fsync' 'no-fsync' 'allow-downgrade' 'min-free=' 'purge-when-low' 'on-complete=' 'on-fail=' 'hook-timeout=' 'json' 'version' 'h/help'
        case 'add'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'i/input-file=' 'd/dir=' 'o/output=' 'H/header=+' 'user-agent=' 'connections=' 'checksum=' 'limit-rate-each=' 'version' 'h/help'
        case 'list'
            __haul_parse_subcommand 0 'state=' 'config=' 'json' 'version' 'h/help'
        case 'pause'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'version' 'h/help'
        case 'resume'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'version' 'h/help'
        case 'cancel'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'version' 'h/help'
        case 'remove'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'version' 'h/help'
        case 'start'
            __haul_parse_subcommand -r 1 'state=' 'config=' 'i/input-file=' 'd/dir=' 'o/output=' 'H/header=+' 'user-agent=' 'connections=' 'checksum=' 'limit-rate-each=' 'j/max-active=' 'max-tries=' 'connect-timeout=' 'stall-timeout=' 'limit-rate=' 'ca-certificate=' 'fsync' 'no-fsync' 'allow-downgrade' 'min-free=' 'purge-when-low' 'on-complete=' 'on-fail=' 'hook-timeout=' 'foreground' 'version' 'h/help'
        case 'stop'
            __haul_parse_subcommand 0 'state=' 'config=' 'version' 'h/help'
        case 'demo'
            __haul_parse_subcommand 0 'state=' 'config=' 'd/dir=' 'j/max-active=' 'max-tries=' 'connect-timeout=' 'stall-timeout=' 'limit-rate=' 'ca-certificate=' 'fsync' 'no-fsync' 'allow-downgrade' 'min-free=' 'purge-when-low' 'on-complete=' 'on-fail=' 'hook-timeout=' 'refresh=' 'ascii' 'no-ascii' 'mouse' 'no-mouse' 'version' 'h/help'
        case 'help'
            __haul_parse_subcommand -r 1 'version'
        end
    end
end

function __haul_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __haul_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __haul_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __haul_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__haul_tokens -p)
    if test -z "$(__haul_tokens -t)"
        set -l index (count (__haul_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'haul' -f
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'ui' -d 'Open the terminal UI on the queue (the default: `haul` and `haul URL...` run this).'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'get' -d 'Download URLs headless, printing one line per state change.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'add' -d 'Add URLs to the queue without downloading them yet.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'list' -d 'Print the queue: state, bytes, total, resume offset, path, URL and error of each download.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'pause' -d 'Pause downloads by id (bytes kept); they stay paused when haul next runs the queue.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'resume' -d 'Queue paused or failed downloads again by id; the next haul resumes them from their bytes.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'cancel' -d 'Cancel downloads by id and delete their partial data (the only command that discards bytes).'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'remove' -d 'Forget completed, failed or cancelled downloads by id; their files stay.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'start' -d 'Run the queue in the background, without a terminal; haul attaches to it, haul stop ends it.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'stop' -d 'Stop the queue\'s runner: pause everything, checkpoint, and wait for it to exit.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'demo' -d 'Try haul offline: a local server with a dozen sample downloads, in the terminal UI.'
complete -c 'haul' -n '__haul_should_offer_completions_for_positional "haul" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" i input-file' -s 'i' -l 'input-file' -d 'Also the URLs listed in FILE (one per line, # comments).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" d dir' -s 'd' -l 'dir' -d 'Directory for downloads named by the server or the URL (default: dir in the config, else the current directory).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" o output' -s 'o' -l 'output' -d 'Write the single URL\'s download to FILE (relative to -d).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui"' -s 'H' -l 'header' -d 'Send this header with every request of these downloads (repeatable; kept with each download).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" user-agent' -l 'user-agent' -d 'User-Agent for these downloads (and the default of this run).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" connections' -l 'connections' -d 'Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" checksum' -l 'checksum' -d 'Verify the single download at completion: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" limit-rate-each' -l 'limit-rate-each' -d 'Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" j max-active' -s 'j' -l 'max-active' -d 'How many downloads run at once, 1 to 32 (default: max-active in the config, else what < and > last chose, else 3).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" max-tries' -l 'max-tries' -d 'Failed attempts in a row before a download fails (default 20).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" connect-timeout' -l 'connect-timeout' -d 'Seconds to wait for a connection (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" stall-timeout' -l 'stall-timeout' -d 'Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" limit-rate' -l 'limit-rate' -d 'Limit all downloads together to RATE bytes a second: 500K, 2M (K = 1024); for this run (default: limit-rate in the config, else the limit last set while the queue ran).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" ca-certificate' -l 'ca-certificate' -d 'Trust only the CA certificates in this PEM FILE (replaces the system\'s, like curl --cacert).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" fsync' -l 'fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" no-fsync' -l 'no-fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" allow-downgrade' -l 'allow-downgrade' -d 'Follow a redirect from https to http (refused by default: the rest would travel unencrypted).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" min-free' -l 'min-free' -d 'Free space to keep where downloads go: under it they wait, bytes kept, and go on when there is room (default: 1G or 1% of the file system, whichever is smaller; 0: only a full disk stops them).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" purge-when-low' -l 'purge-when-low' -d 'When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" on-complete' -l 'on-complete' -d 'Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" on-fail' -l 'on-fail' -d 'Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" hook-timeout' -l 'hook-timeout' -d 'Kill a hook still running after this long, with its children: 30s, 10m, 1h or seconds (default 10m).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" refresh' -l 'refresh' -d 'Most redraws a second, 1 to 10 (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" ascii' -l 'ascii' -d 'Draw bars and marks in ASCII (automatic when the locale is not UTF-8).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" no-ascii' -l 'no-ascii' -d 'Draw bars and marks in ASCII (automatic when the locale is not UTF-8).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" mouse' -l 'mouse' -d 'Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" no-mouse' -l 'no-mouse' -d 'Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul ui" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" i input-file' -s 'i' -l 'input-file' -d 'Also the URLs listed in FILE (one per line, # comments).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" d dir' -s 'd' -l 'dir' -d 'Directory for downloads named by the server or the URL (default: dir in the config, else the current directory).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" o output' -s 'o' -l 'output' -d 'Write the single URL\'s download to FILE (relative to -d).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get"' -s 'H' -l 'header' -d 'Send this header with every request of these downloads (repeatable; kept with each download).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" user-agent' -l 'user-agent' -d 'User-Agent for these downloads (and the default of this run).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" connections' -l 'connections' -d 'Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" checksum' -l 'checksum' -d 'Verify the single download at completion: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" limit-rate-each' -l 'limit-rate-each' -d 'Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" j max-active' -s 'j' -l 'max-active' -d 'How many downloads run at once, 1 to 32 (default: max-active in the config, else what < and > last chose, else 3).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" max-tries' -l 'max-tries' -d 'Failed attempts in a row before a download fails (default 20).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" connect-timeout' -l 'connect-timeout' -d 'Seconds to wait for a connection (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" stall-timeout' -l 'stall-timeout' -d 'Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" limit-rate' -l 'limit-rate' -d 'Limit all downloads together to RATE bytes a second: 500K, 2M (K = 1024); for this run (default: limit-rate in the config, else the limit last set while the queue ran).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" ca-certificate' -l 'ca-certificate' -d 'Trust only the CA certificates in this PEM FILE (replaces the system\'s, like curl --cacert).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" fsync' -l 'fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" no-fsync' -l 'no-fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" allow-downgrade' -l 'allow-downgrade' -d 'Follow a redirect from https to http (refused by default: the rest would travel unencrypted).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" min-free' -l 'min-free' -d 'Free space to keep where downloads go: under it they wait, bytes kept, and go on when there is room (default: 1G or 1% of the file system, whichever is smaller; 0: only a full disk stops them).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" purge-when-low' -l 'purge-when-low' -d 'When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" on-complete' -l 'on-complete' -d 'Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" on-fail' -l 'on-fail' -d 'Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" hook-timeout' -l 'hook-timeout' -d 'Kill a hook still running after this long, with its children: 30s, 10m, 1h or seconds (default 10m).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" json' -l 'json' -d 'Print one JSON object per event instead of text.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul get" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" i input-file' -s 'i' -l 'input-file' -d 'Also the URLs listed in FILE (one per line, # comments).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" d dir' -s 'd' -l 'dir' -d 'Directory for downloads named by the server or the URL (default: dir in the config, else the current directory).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" o output' -s 'o' -l 'output' -d 'Write the single URL\'s download to FILE (relative to -d).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add"' -s 'H' -l 'header' -d 'Send this header with every request of these downloads (repeatable; kept with each download).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" user-agent' -l 'user-agent' -d 'User-Agent for these downloads (and the default of this run).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" connections' -l 'connections' -d 'Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" checksum' -l 'checksum' -d 'Verify the single download at completion: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" limit-rate-each' -l 'limit-rate-each' -d 'Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul add" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul list" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul list" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul list" json' -l 'json' -d 'Print a JSON array, one object per download.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul list" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul pause" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul pause" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul pause" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul pause" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul resume" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul resume" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul resume" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul resume" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul cancel" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul cancel" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul cancel" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul cancel" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul remove" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul remove" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul remove" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul remove" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" i input-file' -s 'i' -l 'input-file' -d 'Also the URLs listed in FILE (one per line, # comments).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" d dir' -s 'd' -l 'dir' -d 'Directory for downloads named by the server or the URL (default: dir in the config, else the current directory).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" o output' -s 'o' -l 'output' -d 'Write the single URL\'s download to FILE (relative to -d).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start"' -s 'H' -l 'header' -d 'Send this header with every request of these downloads (repeatable; kept with each download).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" user-agent' -l 'user-agent' -d 'User-Agent for these downloads (and the default of this run).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" connections' -l 'connections' -d 'Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" checksum' -l 'checksum' -d 'Verify the single download at completion: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" limit-rate-each' -l 'limit-rate-each' -d 'Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" j max-active' -s 'j' -l 'max-active' -d 'How many downloads run at once, 1 to 32 (default: max-active in the config, else what < and > last chose, else 3).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" max-tries' -l 'max-tries' -d 'Failed attempts in a row before a download fails (default 20).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" connect-timeout' -l 'connect-timeout' -d 'Seconds to wait for a connection (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" stall-timeout' -l 'stall-timeout' -d 'Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" limit-rate' -l 'limit-rate' -d 'Limit all downloads together to RATE bytes a second: 500K, 2M (K = 1024); for this run (default: limit-rate in the config, else the limit last set while the queue ran).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" ca-certificate' -l 'ca-certificate' -d 'Trust only the CA certificates in this PEM FILE (replaces the system\'s, like curl --cacert).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" fsync' -l 'fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" no-fsync' -l 'no-fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" allow-downgrade' -l 'allow-downgrade' -d 'Follow a redirect from https to http (refused by default: the rest would travel unencrypted).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" min-free' -l 'min-free' -d 'Free space to keep where downloads go: under it they wait, bytes kept, and go on when there is room (default: 1G or 1% of the file system, whichever is smaller; 0: only a full disk stops them).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" purge-when-low' -l 'purge-when-low' -d 'When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" on-complete' -l 'on-complete' -d 'Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" on-fail' -l 'on-fail' -d 'Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" hook-timeout' -l 'hook-timeout' -d 'Kill a hook still running after this long, with its children: 30s, 10m, 1h or seconds (default 10m).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" foreground' -l 'foreground' -d 'Run in this process (for systemd and other service managers) instead of in the background.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul start" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul stop" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul stop" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul stop" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul stop" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" state' -l 'state' -d 'Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" config' -l 'config' -d 'Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" d dir' -s 'd' -l 'dir' -d 'Directory for the sample files (default: downloads/ in the state directory).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" j max-active' -s 'j' -l 'max-active' -d 'How many downloads run at once, 1 to 32 (default: max-active in the config, else what < and > last chose, else 3).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" max-tries' -l 'max-tries' -d 'Failed attempts in a row before a download fails (default 20).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" connect-timeout' -l 'connect-timeout' -d 'Seconds to wait for a connection (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" stall-timeout' -l 'stall-timeout' -d 'Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" limit-rate' -l 'limit-rate' -d 'Limit all downloads together to RATE bytes a second: 500K, 2M (K = 1024); for this run (default: limit-rate in the config, else the limit last set while the queue ran).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" ca-certificate' -l 'ca-certificate' -d 'Trust only the CA certificates in this PEM FILE (replaces the system\'s, like curl --cacert).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" fsync' -l 'fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" no-fsync' -l 'no-fsync' -d 'fsync each file before it is reported completed (default; --no-fsync for scratch downloads).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" allow-downgrade' -l 'allow-downgrade' -d 'Follow a redirect from https to http (refused by default: the rest would travel unencrypted).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" min-free' -l 'min-free' -d 'Free space to keep where downloads go: under it they wait, bytes kept, and go on when there is room (default: 1G or 1% of the file system, whichever is smaller; 0: only a full disk stops them).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" purge-when-low' -l 'purge-when-low' -d 'When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" on-complete' -l 'on-complete' -d 'Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" on-fail' -l 'on-fail' -d 'Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" hook-timeout' -l 'hook-timeout' -d 'Kill a hook still running after this long, with its children: 30s, 10m, 1h or seconds (default 10m).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" refresh' -l 'refresh' -d 'Most redraws a second, 1 to 10 (default 10).' -rfka ''
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" ascii' -l 'ascii' -d 'Draw bars and marks in ASCII (automatic when the locale is not UTF-8).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" no-ascii' -l 'no-ascii' -d 'Draw bars and marks in ASCII (automatic when the locale is not UTF-8).'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" mouse' -l 'mouse' -d 'Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" no-mouse' -l 'no-mouse' -d 'Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" version' -l 'version' -d 'Show the version.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul demo" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'haul' -n '__haul_should_offer_completions_for_flags_or_options "haul help" version' -l 'version' -d 'Show the version.'
