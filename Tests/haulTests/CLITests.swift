import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The command line as scripts use it: every option, the config file, bad input, and the queue
/// commands (`add`, `list`, `pause`, `resume`, `cancel`, `remove`), on the real binary.
@Suite struct CLITests {
    typealias Run = HaulProcess.Run

    /// Writes the config file the binary reads in `directory` (its XDG_CONFIG_HOME is `directory/.config`).
    func writeConfig(_ text: String, in directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory + "/.config/haul", withIntermediateDirectories: true)
        try text.write(toFile: directory + "/.config/haul/config", atomically: true, encoding: .utf8)
    }

    // MARK: Every option works

    @Test func everyOptionOfGetIsAcceptedAndApplied() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/all.bin", size: 300_000)
            try FileManager.default.createDirectory(atPath: directory + "/out", withIntermediateDirectories: true)
            let run = try await CLI.haul([
                "get", server.url("/all.bin").absoluteString,
                "-d", "out", "-o", "named.bin", "-j", "2", "--max-tries", "3", "--connect-timeout", "5",
                "--stall-timeout", "20", "--limit-rate", "10M", "-H", "X-Token: secret", "-H", "Accept-Language: de",
                "--user-agent", "haul-test/1", "--checksum", "sha-256=" + server.sha256("/all.bin"), "--no-fsync",
                "--state", directory + "/.state",
            ], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(ofFile: directory + "/out/named.bin") == server.sha256("/all.bin"))
            let request = try #require(server.requests("/all.bin").first)
            #expect(request.userAgent == "haul-test/1")
            #expect(request.headers.contains("X-Token: secret"))
            #expect(request.headers.contains("Accept-Language: de"))
        }
    }

    /// `-i <(…)`, a FIFO, `/dev/stdin`: a list that is not a regular file is read to its end (the
    /// first versions said `permission denied`, Foundation refusing to read a pipe).
    @Test func aListOfURLsIsReadFromAPipe() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/p1.bin", size: 70_000)
            server.serve("/p2.bin", size: 90_000)
            let list = "# piped\n\(server.url("/p1.bin").absoluteString)\n\(server.url("/p2.bin").absoluteString)\n"
            // The writer blocks until haul opens the FIFO: the list comes through a pipe.
            let run = try await HaulProcess(
                ["get", "-i", "list.fifo", "-d", directory], in: directory, state: directory + "/.state",
                shell: "mkfifo list.fifo && { printf '%s' \(shellQuoted(list)) > list.fifo & } &&"
            ).wait()
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(ofFile: directory + "/p1.bin") == server.sha256("/p1.bin"))
            #expect(sha256(ofFile: directory + "/p2.bin") == server.sha256("/p2.bin"))
            let folder = try await CLI.haul(["get", "-i", directory], in: directory)
            #expect(folder.status == 2)
            #expect(folder.stderr == "haul: error: cannot read \(directory): is a directory\n")
        }
    }

    @Test func aWrongChecksumFailsTheRowAndKeepsThePart() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/sum.bin", size: 200_000)
            let wrong = String(repeating: "ab", count: 32)
            let run = try await CLI.haul(["get", server.url("/sum.bin").absoluteString, "--checksum", "sha-256=\(wrong)"], in: directory)
            #expect(run.status == 1)
            #expect(run.stdout.contains("sha-256 mismatch"), "\(run.stdout)")
            #expect(CLI.files(directory) == ["sum.bin.part"])
            #expect(fileLength(directory + "/sum.bin.part") == 200_000)
            let rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.first?["state"] as? String == "failed")
            #expect(rows.first?["checksum"] as? String == "sha-256=\(wrong)")
        }
    }

    @Test func limitRateHoldsTheTotalBackAndTheFileIsRight() async throws {
        try await CLI.withServer { server, directory in
            // 768 KiB at 256 KiB/s with a quarter second of burst cannot take less than 2.7 s.
            server.serve("/slow.bin", size: 768 * 1024)
            let started = Date()
            let run = try await CLI.haul(["get", server.url("/slow.bin").absoluteString, "--limit-rate", "256K"], in: directory)
            let elapsed = Date().timeIntervalSince(started)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(ofFile: directory + "/slow.bin") == server.sha256("/slow.bin"))
            #expect(elapsed >= 2.5, "took \(elapsed) s: the limit did not hold")
        }
    }

    @Test func proxiesComeFromTheEnvironmentLikeCurl() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/via.bin", size: 100_000)
            // Like squid's default: CONNECT to port 80 is refused, absolute form is served.
            let proxy = try TunnelProxy(tunnellingTo: server.port)
            defer { proxy.stop() }
            // The host does not exist: only a request through the proxy can succeed.
            let run = try await CLI.haul(
                ["get", "http://files.haul-test.invalid/via.bin"], in: directory, environment: ["http_proxy": "127.0.0.1:\(proxy.port)"]
            )
            #expect(run.status == 0, "\(run.stderr)\(run.stdout)")
            #expect(proxy.requestLines.first == "GET http://files.haul-test.invalid/via.bin HTTP/1.1")
            #expect(server.requests("/via.bin").first?.host == "files.haul-test.invalid")
            #expect(server.requests("/via.bin").first?.absoluteForm == true)
            #expect(sha256(ofFile: directory + "/via.bin") == server.sha256("/via.bin"))

            // no_proxy sends 127.0.0.1 direct; an upper-case HTTP_PROXY is ignored, as curl does.
            server.serve("/direct.bin", size: 1000)
            server.serve("/upper.bin", size: 1000)
            let bypassed = try await CLI.haul(
                ["get", server.url("/direct.bin").absoluteString], in: directory,
                environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "localhost, 127.0.0.1"]
            )
            #expect(bypassed.status == 0, "\(bypassed.stderr)\(bypassed.stdout)")
            let upper = try await CLI.haul(
                ["get", server.url("/upper.bin").absoluteString], in: directory, environment: ["HTTP_PROXY": "http://127.0.0.1:\(proxy.port)"]
            )
            #expect(upper.status == 0, "\(upper.stderr)\(upper.stdout)")
            #expect(proxy.requestLines.count == 1, "only the first download went through the proxy: \(proxy.requestLines)")
            #expect(fileLength(directory + "/direct.bin") == 1000)
            #expect(fileLength(directory + "/upper.bin") == 1000)

            let bad = try await CLI.haul(["get", server.url("/direct.bin").absoluteString], in: directory, environment: ["https_proxy": "socks5://127.0.0.1:1"])
            #expect(bad.status == 2)
            #expect(bad.stderr == "haul: error: https_proxy: only http:// proxies are supported\n")
        }
    }

    // MARK: Bad input: one line, exit 2, nothing created

    @Test(arguments: [
        (["get", "not a url"], "invalid URL"),
        (["get", "ftp://example.com/file"], "unsupported scheme 'ftp'"),
        (["get", "http://"], "invalid URL"),
        (["get", "https://127.0.0.1:99999/x"], "invalid URL 'https://127.0.0.1:99999/x': port 99999 is not between 1 and 65535"),
        (["add", "-i", "missing-list.txt"], "cannot read missing-list.txt"),
        (["get", "-i", "missing-list.txt"], "cannot read missing-list.txt"),
        (["add", "http://example.com/a", "-d", "/proc/haul-no-such-dir"], "directory does not exist"),
        (["add", "http://example.com/a", "-d", "/proc"], "directory is not writable"),
        (["add", "http://example.com/a", "http://example.com/b", "-o", "x.bin"], "-o/--output takes a single URL"),
        (["add", "http://example.com/a", "--checksum", "sha-256=" + String(repeating: "0", count: 64), "http://example.com/b"], "--checksum checks a single URL"),
        (["add", "http://example.com/a", "--checksum", "md5=abc"], "not supported"),
        (["add", "http://example.com/a", "--checksum", "sha-256=xyz"], "64 hex digits"),
        (["add", "http://example.com/a", "-H", "NoColon"], "is not 'Name: value'"),
        (["add", "http://example.com/a", "-H", "X-A: b\r\nX-Injected: 1"], "control characters"),
        (["add", "http://example.com/a", "-H", "Range: bytes=0-"], "set by haul itself"),
        (["get", "http://example.com/a", "--limit-rate", "fast"], "not a size"),
        (["get", "http://example.com/a", "--limit-rate", "100"], "at least 1K"),
        (["get", "http://example.com/a", "--limit-rate", "0"], "haul: error: --limit-rate must be at least 1K (a limit the queue keeps is lifted with 0 at the UI's L key, or PUT /v1/limit)"),
        (["add", "http://example.com/a", "--limit-rate-each", "500"], "--limit-rate-each must be at least 1K, or 0 for none"),
        (["get", "http://example.com/a", "--limit-rate-each", "fast"], "not a size"),
        (["get", "http://example.com/a", "-j", "0"], "--max-active must be between 1 and 32"),
        (["get", "http://example.com/a", "--max-tries", "0"], "--max-tries must be between"),
        (["get", "http://example.com/a", "--stall-timeout", "0"], "--stall-timeout must be between"),
        (["get", "http://example.com/a", "--connect-timeout", "0"], "--connect-timeout must be between"),
        (["get", "http://example.com/a", "--ca-certificate", "no-such.pem"], "cannot read the CA certificate file"),
        (["get", "http://example.com/a", "--ca-certificate", "/tmp"], "haul: error: the CA certificate file /tmp is a directory"),
        (["get", "http://example.com/a", "--refresh", "5"], "haul: error: unknown option '--refresh'"),
        (["get"], "no URL given"),
        (["add"], "no URL given"),
        (["get", "http://example.com/a", "--bogus"], "haul: error: unknown option '--bogus'"),
        // A negative number after an option is its value, refused in haul's words (the parser
        // took it for an option and said the value was missing).
        (["get", "http://example.com/a", "-j", "-3"], "haul: error: --max-active must be between 1 and 32"),
        (["get", "http://example.com/a", "--connections", "-1"], "haul: error: --connections must be between 1 and 16"),
        (["get", "http://example.com/a", "--max-tries", "-1"], "haul: error: --max-tries must be between 1 and 10000"),
        (["get", "http://example.com/a", "--limit-rate", "-5K"], "haul: error: --limit-rate '-5K' is not a size"),
        (["ui", "http://example.com/a", "--refresh", "-2"], "haul: error: --refresh must be between 1 and 10"),
        (["ui", "http://example.com/a", "--refresh", "nan"], "haul: error: --refresh must be a number, not 'nan'"),
        (["get", "http://example.com/a", "-j", "99999999999999999999"], "haul: error: --max-active must be between 1 and 32"),
        (["get", "http://example.com/a", "--stall-timeout", "soon"], "haul: error: --stall-timeout must be a whole number, not 'soon'"),
        (["get", "http://example.com/a", "--connections"], "haul: error: --connections needs a value"),
        (["get", "http://example.com/a", "--no-fsync=1"], "haul: error: --no-fsync takes no value"),
        // Found by a tester (nineteenth session): an empty value is never the default; a port
        // that does not fit an integer went to port 80; a refused URL showed its password.
        (["get", "http://example.com/a", "--state", ""], "haul: error: --state is empty: give the queue's directory"),
        (["add", "http://example.com/a", "--config", ""], "haul: error: --config is empty: give a file"),
        (["add", "http://example.com/a", "-d", ""], "haul: error: -d/--dir is empty: give a directory"),
        (["get", "http://127.0.0.1:99999999999999999999/x"], "port 99999999999999999999 is not between 1 and 65535"),
        (["get", "http://u:hunter2@127.0.0.1:0/a"], "haul: error: invalid URL 'http://u:***@127.0.0.1:0/a': port 0 is not between 1 and 65535"),
        // After `--` a word is an argument: here a URL.
        (["get", "-j", "5", "--", "-3"], "haul: error: invalid URL '-3'"),
    ])
    func badInputIsRefusedAndChangesNothing(arguments: [String], expected: String) async throws {
        let scratch = try TemporaryDirectory("haul-bad")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let run = try await CLI.haul(arguments, in: directory)
        #expect(run.status == 2, "\(arguments): \(run.stderr)")
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one line, got: \(run.stderr)")
        #expect(run.stderr.hasPrefix("haul: "), "\(run.stderr)")
        #expect(run.stderr.contains(expected), "\(arguments): expected '\(expected)' in: \(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(CLI.files(directory).isEmpty, "nothing created: \(CLI.files(directory))")
        #expect(!FileManager.default.fileExists(atPath: directory + "/.state"), "no queue created")
    }

    /// No download goes into the state directory: a tester's `-o STATE/queue.sqlite` was placed
    /// over the queue (every later command found it damaged), and `-o STATE/lock` was rewritten.
    @Test func aDownloadIntoTheStateDirectoryIsRefused() async throws {
        let scratch = try TemporaryDirectory("haul-state-out")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let state = directory + "/.state"
        let added = try await CLI.haul(["add", "http://example.com/a", "-d", directory], in: directory)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(symlink(state, directory + "/link") == 0)
        let before = try await CLI.list(state: state, in: directory)
        let stateFiles = CLI.files(state)
        for arguments in [
            ["get", "http://example.com/b", "-o", ".state/queue.sqlite"],
            ["add", "http://example.com/b", "-o", "sub/../.state/lock"],
            ["get", "http://example.com/b", "-o", "link/haul.log"],
            ["add", "http://example.com/b", "-d", ".state"],
            ["get", "http://example.com/b", "-d", "link"],
        ] {
            let run = try await CLI.haul(arguments, in: directory)
            #expect(run.status == 2, "\(arguments): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1 && run.stderr.contains("is in haul's state directory, which holds the queue"), "\(arguments): \(run.stderr)")
        }
        let after = try await CLI.list(state: state, in: directory)
        #expect(after.count == before.count && after.count == 1, "nothing queued: \(after)")
        #expect(CLI.files(state) == stateFiles)
    }

    /// Found by a tester: a list and a config file with CRLF line ends (and a list with a BOM)
    /// were read as one line and refused; `-o` on a FIFO replaced it with a file; `remove 1 1`
    /// said there was no download 1.
    @Test func windowsLineEndsSpecialFilesAndRepeatedIDs() async throws {
        let scratch = try TemporaryDirectory("haul-crlf")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let state = directory + "/.state"
        try "\u{FEFF}http://example.com/a\r\n# a comment\r\nhttp://example.com/b\r\n".write(toFile: directory + "/list.txt", atomically: true, encoding: .utf8)
        try "max-active = 4\r\nlimit-rate = 5M\r\n".write(toFile: directory + "/config", atomically: true, encoding: .utf8)
        let added = try await CLI.haul(["add", "-i", "list.txt", "-d", directory, "--config", "config"], in: directory)
        #expect(added.status == 0, "\(added.stderr)")
        let rows = try await CLI.list(state: state, in: directory)
        #expect(rows.compactMap { $0["url"] as? String } == ["http://example.com/a", "http://example.com/b"])
        #expect(mkfifo(directory + "/out.fifo", 0o644) == 0)
        let fifo = try await CLI.haul(["add", "http://example.com/c", "-o", "out.fifo"], in: directory)
        #expect(fifo.status == 2 && fifo.stderr.contains("names a device, FIFO or socket, not a file haul may replace"), "\(fifo.stderr)")
        var info = stat()
        #expect(lstat(directory + "/out.fifo", &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
        let cancelled = try await CLI.haul(["cancel", "1"], in: directory)
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        let removed = try await CLI.haul(["remove", "1", "1"], in: directory)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "removed 1\n")
        #expect(try await CLI.list(state: state, in: directory).count == 1)
    }

    @Test func aCertificateFileThatIsNotPEMIsRefused() async throws {
        let scratch = try TemporaryDirectory("haul-ca")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        try "not a certificate\n".write(toFile: directory + "/.bad.pem", atomically: true, encoding: .utf8)
        let run = try await CLI.haul(["get", "https://example.com/a", "--ca-certificate", ".bad.pem"], in: directory)
        #expect(run.status == 2)
        #expect(run.stderr.contains("holds no PEM certificate"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/.state"))
    }

    // MARK: The configuration file

    @Test func configSetsDefaultsAndFlagsOverrideThem() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/c1.bin", size: 50_000)
            server.serve("/c2.bin", size: 50_000)
            try FileManager.default.createDirectory(atPath: directory + "/from-config", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory + "/from-flag", withIntermediateDirectories: true)
            try writeConfig("""
            # haul settings
            dir = \(directory)/from-config
            user-agent = configured/1
            header = X-From: config
            max-tries = 4

            fsync = false
            """, in: directory)
            let first = try await CLI.haul(["get", server.url("/c1.bin").absoluteString], in: directory)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(fileLength(directory + "/from-config/c1.bin") == 50_000)
            let configured = try #require(server.requests("/c1.bin").first)
            #expect(configured.userAgent == "configured/1")
            #expect(configured.headers.contains("X-From: config"))

            let second = try await CLI.haul(
                ["get", server.url("/c2.bin").absoluteString, "-d", "from-flag", "--user-agent", "flag/2", "-H", "X-From: flag"], in: directory
            )
            #expect(second.status == 0, "\(second.stderr)")
            #expect(fileLength(directory + "/from-flag/c2.bin") == 50_000)
            #expect(fileLength(directory + "/from-config/c2.bin") == nil)
            let flagged = try #require(server.requests("/c2.bin").first)
            #expect(flagged.userAgent == "flag/2")
            #expect(flagged.headers.contains("X-From: flag"))
            #expect(!flagged.headers.contains("X-From: config"))
        }
    }

    @Test(arguments: [
        ("max-active = 3\ncolour = blue\n", "config:2: unknown key 'colour'"),
        ("# fine\nmax-active = many\n", "config:2: max-active must be a whole number"),
        ("max-active = 40\n", "config:1: max-active must be between 1 and 32"),
        ("checksum = sha-256=00\n", "config:1: 'checksum' belongs to one download"),
        ("just words\n", "config:1: expected 'key = value'"),
        ("= 3\n", "config:1: expected 'key = value' (no key before '=')"),
        ("header = X-Bad\n", "config:1: header 'X-Bad' is not 'Name: value'"),
        ("fsync = maybe\n", "config:1: fsync must be true or false"),
        ("limit-rate-each = 12\n", "config:1: limit-rate-each must be at least 1K, or 0 for none"),
    ])
    func aBadConfigLineIsAnErrorNamingTheLine(config: String, expected: String) async throws {
        let scratch = try TemporaryDirectory("haul-cfg")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        try writeConfig(config, in: directory)
        let run = try await CLI.haul(["add", "http://example.com/a"], in: directory)
        #expect(run.status == 2)
        #expect(run.stderr.contains(expected), "expected '\(expected)' in: \(run.stderr)")
        #expect(run.stderr.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: directory + "/.state"))
    }

    /// The keys an unknown key's error names are the README's, every one of them accepted: the
    /// list lacked `mouse`, which the README and the parser both had.
    @Test func theConfigKeysAreTheREADMEs() async throws {
        let scratch = try TemporaryDirectory("haul-cfg")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        try writeConfig("colour = blue\n", in: directory)
        let run = try await CLI.haul(["add", "http://example.com/a"], in: directory)
        let named = try #require(run.stderr.range(of: "(known: ").map { run.stderr[$0.upperBound...].prefix { $0 != ")" } })
        let known = named.components(separatedBy: ", ")
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: repository.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "Keys are the long option names: "))
        let end = try #require(readme.range(of: ". Flags override", range: start.upperBound..<readme.endIndex))
        let listed = readme[start.upperBound..<end.lowerBound].components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        #expect(Set(known) == Set(listed), "README: \(listed), haul: \(known)")
        #expect(known.count == Set(known).count)
        // Each key named is one the parser takes (a bad value is its error, never an unknown key).
        for key in known {
            try writeConfig("\(key) = ?\n", in: directory)
            let line = try await CLI.haul(["add", "http://example.com/a"], in: directory)
            #expect(!line.stderr.contains("unknown key"), "\(key): \(line.stderr)")
        }
    }

    @Test func anExplicitConfigFileMustExist() async throws {
        let scratch = try TemporaryDirectory("haul-cfg")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let run = try await CLI.haul(["add", "http://example.com/a", "--config", "nope.conf"], in: directory)
        #expect(run.status == 2)
        #expect(run.stderr.contains("cannot read the config file nope.conf"), "\(run.stderr)")
    }

    // MARK: add, list, pause, resume, cancel, remove

    @Test func addAndListJSONRoundTrip() async throws {
        try await CLI.withServer { server, directory in
            let a = server.url("/a.iso").absoluteString
            let b = server.url("/b.iso").absoluteString
            let digest = String(repeating: "1f", count: 32)
            try "# list\n\(b)\n\n".write(toFile: directory + "/.urls", atomically: true, encoding: .utf8)
            let added = try await CLI.haul(["add", a, "-H", "Authorization: Bearer t0ken"], in: directory)
            #expect(added.status == 0, "\(added.stderr)")
            #expect(added.stdout == "1\tqueued\t\(a)\n")
            let fromFile = try await CLI.haul(["add", "-i", ".urls", "-d", "sub"], in: directory)
            #expect(fromFile.status == 2, "sub does not exist yet")
            try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
            #expect(try await CLI.haul(["add", "-i", ".urls", "-d", "sub"], in: directory).status == 0)
            #expect(try await CLI.haul(["add", "http://example.com/c.bin", "-o", "c-named.bin", "--checksum", "sha-256=\(digest)"], in: directory).status == 0)
            // The same URL again is the same download.
            let again = try await CLI.haul(["add", a], in: directory)
            #expect(again.stdout == "1\tqueued\t\(a)\n")

            let rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.map { $0["id"] as? Int } == [1, 2, 3])
            #expect(rows.map { $0["url"] as? String } == [a, b, "http://example.com/c.bin"])
            #expect(rows.map { $0["state"] as? String } == ["queued", "queued", "queued"])
            #expect(rows.map { $0["path"] as? String } == [directory + "/a.iso.part", directory + "/sub/b.iso.part", directory + "/c-named.bin.part"])
            #expect(rows[0]["header_names"] as? [String] == ["Authorization"])
            #expect(rows[2]["checksum"] as? String == "sha-256=\(digest)")
            #expect(!(try await CLI.haul(["list"], in: directory).stdout.contains("t0ken")), "header values are never printed")
            #expect(server.requests().isEmpty, "add transfers nothing")
            #expect(CLI.files(directory) == ["sub"])
        }
    }

    /// Two requesters of one URL share its transfer, each with its own file; `haul get -d b`
    /// says b's file (it named the first requester's, in another directory).
    @Test func getNamesTheFileItAskedForWhenAnotherRequesterSharesTheURL() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/shared.bin", size: 40_000)
            let url = server.url("/shared.bin").absoluteString
            for sub in ["a", "b"] { try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true) }
            #expect(try await CLI.haul(["add", url, "-d", "a"], in: directory).status == 0)
            let got = try await CLI.haul(["get", url, "-d", "b"], in: directory)
            #expect(got.status == 0, "\(got.stderr)")
            #expect(got.stdout.contains("[1] completed \(directory)/b/shared.bin (39.0 KiB)"), "\(got.stdout)")
            #expect(fileLength(directory + "/a/shared.bin") == 40_000)
            #expect(fileLength(directory + "/b/shared.bin") == 40_000)
            #expect(server.requests("/shared.bin").count == 1, "one transfer for both")
        }
    }

    @Test func pauseResumeCancelRemoveEditTheQueueOffline() async throws {
        try await CLI.withServer { server, directory in
            let urls = ["/p1.bin", "/p2.bin", "/p3.bin"].map { server.url($0).absoluteString }
            #expect(try await CLI.haul(["add"] + urls, in: directory).status == 0)
            // A part file with bytes, as a quit leaves it: marked as download 3's of this queue. An
            // unmarked one, beside a download without bytes of its own, is not its own.
            try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: directory + "/p3.bin.part"))
            let mark = try await ChildProcess.run("/usr/bin/python3", ["-c", """
                import os, sqlite3
                queue = sqlite3.connect('\(directory)/.state/queue.sqlite').execute("SELECT value FROM setting WHERE key = 'queueID'").fetchone()[0]
                os.setxattr('\(directory)/p3.bin.part', 'user.haul.queue', (queue + '/3').encode())
                """])
            try #require(mark.status == 0, "marked")

            let paused = try await CLI.haul(["pause", "1", "3"], in: directory)
            #expect(paused.status == 0, "\(paused.stderr)")
            #expect(paused.stdout == "paused 1\npaused 3\n")
            var rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.map { $0["state"] as? String } == ["paused", "queued", "paused"])

            #expect(try await CLI.haul(["resume", "1"], in: directory).stdout == "queued 1\n")
            let cancelled = try await CLI.haul(["cancel", "3"], in: directory)
            #expect(cancelled.stdout == "cancelled 3\n")
            #expect(fileLength(directory + "/p3.bin.part") == nil, "cancel deletes the part file")
            #expect(try await CLI.haul(["remove", "3"], in: directory).stdout == "removed 3\n")
            try Data(repeating: 8, count: 10).write(to: URL(fileURLWithPath: directory + "/p4.bin.part"))
            #expect(try await CLI.haul(["add", server.url("/p4.bin").absoluteString], in: directory).status == 0)
            #expect(try await CLI.haul(["cancel", "4"], in: directory).stdout == "cancelled 4\n")
            #expect(fileLength(directory + "/p4.bin.part") == 10, "a file download 4 did not write is left alone")
            #expect(try await CLI.haul(["remove", "4"], in: directory).stdout == "removed 4\n")

            // All or nothing: one refused id changes none.
            let refused = try await CLI.haul(["pause", "2", "99"], in: directory)
            #expect(refused.status == 2)
            #expect(refused.stderr == "haul: error: no download 99 in the queue\n")
            let illegal = try await CLI.haul(["remove", "2"], in: directory)
            #expect(illegal.status == 2)
            #expect(illegal.stderr.contains("cannot remove download 2: it is queued"))
            let notAnID = try await CLI.haul(["cancel", "two"], in: directory)
            #expect(notAnID.status == 2)
            #expect(notAnID.stderr.contains("'two' is not a download id"))

            rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.map { $0["id"] as? Int } == [1, 2])
            #expect(rows.map { $0["state"] as? String } == ["queued", "queued"])
            #expect(server.requests().isEmpty, "editing the queue transfers nothing")
        }
    }

    @Test func queueCommandsSaySoWhileAHaulRunsTheQueue() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 64 * 1024
            server.serve("/busy.bin", size: 4 * 1024 * 1024, faults: faults)
            let running = try HaulProcess(["get", server.url("/busy.bin").absoluteString], in: directory, state: directory + "/.state")
            try await eventually("the download runs") { (fileLength(directory + "/busy.bin.part") ?? 0) > 0 }
            for command in [["pause", "1"], ["resume", "1"], ["cancel", "1"], ["remove", "1"], ["add", "http://example.com/x"]] {
                let run = try await CLI.haul(command, in: directory)
                #expect(run.status == 2, "\(command)")
                #expect(run.stderr.contains("haul (pid \(running.pid)) is running this queue"), "\(command): \(run.stderr)")
                // A haul get has no terminal UI to do it in (a tester read "add in its terminal UI").
                #expect(run.stderr.contains("run this again once it has ended, or \(command[0]) in its terminal UI if it is one"), "\(command): \(run.stderr)")
            }
            // Nor can a haul get be attached to (a tester's `haul start` said `haul attaches to it`).
            let start = try await CLI.haul(["start"], in: directory)
            #expect(start.status == 2)
            #expect(start.stderr.contains("haul (pid \(running.pid)) holds the queue at ") && start.stderr.contains("takes no commands from other shells: run this again once it has ended"), "\(start.stderr)")
            running.send(SIGINT)
            let ended = try await running.wait()
            #expect(ended.status == 130)
            let rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.count == 1, "nothing was added while it ran")
        }
    }

    /// A state directory that is a file, or lies under one, is refused by every command in one
    /// line, and nothing is made. Found by use: `list` said `no downloads` (exit 0), `start`
    /// pointed at a log inside the file, `get` said Foundation's `NSCocoaErrorDomain error 512`.
    @Test(arguments: [
        ["list"], ["list", "--json"], ["start"], ["stop"], ["pause", "1"], ["resume", "1"], ["cancel", "1"], ["remove", "1"],
        ["get", "http://example.com/a"], ["add", "http://example.com/a"],
    ])
    func aStateDirectoryThatIsAFileIsRefusedByEveryCommand(_ command: [String]) async throws {
        let scratch = try TemporaryDirectory("haul-statefile")
        defer { withExtendedLifetime(scratch) {} }
        let file = scratch.path("afile")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("mine".utf8)))
        for (state, expected) in [
            (file, "haul: error: the state directory is not a directory: \(file)\n"),
            (file + "/sub", "haul: error: the state directory cannot be made: part of \(file)/sub is a file, not a directory\n"),
        ] {
            let run = try await HaulProcess(command, in: scratch.path, state: state).wait()
            #expect(run.status == 2, "\(command) \(state): \(run.stdout) \(run.stderr)")
            #expect(run.stderr == expected, "\(command) \(state)")
            #expect(run.stdout.isEmpty, "\(command) \(state): \(run.stdout)")
        }
        #expect(FileManager.default.contents(atPath: file) == Data("mine".utf8))
        #expect(CLI.files(scratch.path) == ["afile"], "nothing made: \(CLI.files(scratch.path))")
    }

    /// A queue that cannot be looked at (its disk failing: here its database is a link to itself,
    /// which fails the look the same way, otherwise than by not being there) is not an empty one,
    /// nor one nobody runs: a tester's `list` said `no downloads`, exit 0, and `stop` said no haul
    /// ran it, of a queue on a file system that had been shut down.
    @Test(arguments: [["list"], ["list", "--json"], ["stop"]])
    func aQueueThatCannotBeLookedAtIsNeverSaidEmpty(_ command: [String]) async throws {
        let scratch = try TemporaryDirectory("haul-stateio")
        defer { withExtendedLifetime(scratch) {} }
        let state = scratch.path("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        #expect(symlink(state + "/queue.sqlite", state + "/queue.sqlite") == 0)
        let run = try await HaulProcess(command, in: scratch.path, state: state).wait()
        #expect(run.status == 1, "\(command): \(run.stdout) \(run.stderr)")
        #expect(run.stderr == "haul: error: cannot read the queue at \(state): Too many levels of symbolic links\n", "\(command): \(run.stderr)")
        #expect(run.stdout.isEmpty, "\(command): \(run.stdout)")
    }

    @Test func completionScriptsAreGenerated() async throws {
        let scratch = try TemporaryDirectory("haul-comp")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        for shell in ["bash", "zsh", "fish"] {
            let run = try await CLI.haul(["--generate-completion-script", shell], in: directory)
            #expect(run.status == 0)
            for word in ["demo", "pause", "limit-rate", "checksum", "max-active", "connections", "allow-downgrade"] {
                #expect(run.stdout.contains(word), "\(shell) completion lacks \(word)")
            }
            // The scripts the README installs from Assets are what this haul generates.
            let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let shipped = try String(contentsOf: repository.appendingPathComponent("Assets/completions/haul.\(shell)"), encoding: .utf8)
            #expect(shipped == run.stdout, "Assets/completions/haul.\(shell) is stale: haul --generate-completion-script \(shell) > it")
        }
    }
}

/// `--ca-certificate` against a real TLS server (`openssl s_server`) with a certificate made here.
@Suite struct CertificateTests {
    @Test func aSelfSignedServerIsRefusedUnlessItsCertificateIsGiven() async throws {
        let scratch = try TemporaryDirectory("haul-tls")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let server = try await OpenSSLServer(in: directory, mode: "-www")
        defer { server.stop() }
        let url = server.url("/")

        // Not retried (no --max-tries 1 needed): the certificate will not change.
        let refused = try await HaulProcess(["get", url, "-o", "refused.html", "--connect-timeout", "2"], in: directory, state: directory + "/.s1").wait(timeout: 20)
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("failed: TLS: the server's certificate is not trusted"), "\(refused.stdout)")
        #expect(refused.stdout.contains("--ca-certificate FILE trusts the CA in FILE"), "\(refused.stdout)")
        #expect(fileLength(directory + "/refused.html") == nil)
        #expect(fileLength(directory + "/refused.html.part") == nil)

        let trusted = try await HaulProcess(
            // haul's own retries, not AsyncHTTPClient's, now cover a connection openssl's one-at-a-time
            // server drops under load.
            ["get", url, "-o", "trusted.html", "--ca-certificate", "cert.pem"], in: directory, state: directory + "/.s2"
        ).wait()
        #expect(trusted.status == 0, "\(trusted.stdout)\(trusted.stderr)")
        let page = try String(contentsOfFile: directory + "/trusted.html", encoding: .utf8)
        #expect(page.contains("s_server"), "openssl's status page")
    }

    /// A server that requires a client certificate (haul sends none) fails the download at once in
    /// one line: over TLS 1.3 its alert comes after the handshake, and a tester's runs said
    /// `network error` and retried for some fourteen minutes.
    @Test(arguments: ["-tls1_3", "-tls1_2"])
    func aServerThatRequiresAClientCertificateFailsAtOnce(version: String) async throws {
        let scratch = try TemporaryDirectory("haul-tls-client")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let server = try await OpenSSLServer(in: directory, mode: "-www", options: ["-Verify", "1", version])
        defer { server.stop() }
        let run = try await HaulProcess(["get", server.url("/"), "-o", "page.html", "--ca-certificate", "cert.pem"], in: directory, state: directory + "/.s").wait(timeout: 60)
        #expect(run.status == 1)
        if version == "-tls1_3" {
            #expect(run.stdout.contains("failed: TLS: the server asks for a client certificate, which haul does not send"), "\(run.stdout)")
            #expect(!run.stdout.contains("retry"), "not retried: \(run.stdout)")
        } else {
            #expect(run.stdout.hasSuffix("failed: the TLS handshake with the server failed\n"), "TLS 1.2 fails the handshake itself, said so after 3 tries: \(run.stdout)")
        }
        #expect(fileLength(directory + "/page.html") == nil)
    }

    /// A server that speaks only HTTP/2 (ALPN `h2` alone) fails at once, saying so: a tester's was
    /// retried three times as `the TLS handshake with the server failed`, which reads like a
    /// certificate's fault (`curl --http1.1` names the alert too).
    @Test func anHTTP2OnlyServerFailsAtOnceSayingSo() async throws {
        let scratch = try TemporaryDirectory("haul-tls-h2")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let server = try await OpenSSLServer(in: directory, mode: "-www", options: ["-alpn", "h2"])
        defer { server.stop() }
        let run = try await HaulProcess(["get", server.url("/"), "-o", "page.html", "--ca-certificate", "cert.pem"], in: directory, state: directory + "/.s").wait(timeout: 60)
        #expect(run.status == 1)
        #expect(run.stdout.contains("failed: TLS: the server speaks only HTTP/2, which haul does not (it speaks HTTP/1.1)"), "\(run.stdout)")
        #expect(!run.stdout.contains("retry"), "not retried: \(run.stdout)")
        #expect(fileLength(directory + "/page.html") == nil)
    }

    /// A server that speaks only TLS 1.0 or 1.1 is refused at once, as curl refuses it (a tester's
    /// was fetched without a word).
    @Test(arguments: ["-tls1", "-tls1_1"])
    func aServerOfTLS11OrOlderIsRefused(version: String) async throws {
        let scratch = try TemporaryDirectory("haul-tls-old")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let server = try await OpenSSLServer(in: directory, mode: "-www", options: [version, "-cipher", "DEFAULT@SECLEVEL=0"])
        defer { server.stop() }
        let run = try await HaulProcess(["get", server.url("/"), "-o", "page.html", "--ca-certificate", "cert.pem"], in: directory, state: directory + "/.s").wait(timeout: 60)
        #expect(run.status == 1)
        #expect(run.stdout.contains("failed: TLS: the server speaks only TLS 1.1 or older, which haul does not accept (as curl)"), "\(run.stdout)")
        #expect(!run.stdout.contains("retry"), "not retried: \(run.stdout)")
    }
}
