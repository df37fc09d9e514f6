import Foundation
import LoopbackServer
import Testing
import TestSupport

/// `--on-complete`, `--on-fail` and `--hook-timeout` on the real binary (issue 18, item 4): the
/// hooks are small shell scripts written here, run by haul without a shell.
@Suite(.serialized) struct HookCLITests {
    /// Writes an executable `#!/bin/sh` script at `directory/name`; its path.
    func script(_ name: String, in directory: String, _ body: String) throws -> String {
        let path = directory + "/" + name
        try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(chmod(path, 0o755) == 0)
        return path
    }

    func log(_ directory: String) -> String {
        (try? String(contentsOfFile: directory + "/.state/haul.log", encoding: .utf8)) ?? ""
    }

    /// `KEY=value` lines of a file the hook wrote.
    func variables(_ path: String) -> [String: String] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var variables: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            variables[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return variables
    }

    /// The hook of download `id` in `haul list --json`.
    func listedHook(_ id: Int, in directory: String) async throws -> [String: Any]? {
        let rows = try await CLI.list(state: directory + "/.state", in: directory)
        return rows.first { $0["id"] as? Int == id }?["hook"] as? [String: Any]
    }

    /// `haul get -j 1` of two files, `one.bin` then `two.bin`, with `hook` on completion and `extra`
    /// arguments: one runs at a time, so the second starts only once the first completed.
    func getTwo(_ server: LoopbackServer, in directory: String, hook: String, _ extra: [String] = []) async throws -> HaulProcess.Run {
        server.serve("/one.bin", size: 40_000)
        server.serve("/two.bin", size: 40_000)
        let urls = [server.url("/one.bin").absoluteString, server.url("/two.bin").absoluteString]
        return try await CLI.haul(["get", "-j", "1"] + urls + ["--on-complete", hook] + extra, in: directory)
    }

    /// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
    static func ended(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return true }
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return stat.contains(") Z ")
    }

    static func pid(_ path: String) -> Int32? {
        (try? String(contentsOfFile: path, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    @Test("18.4: an on-complete hook gets the file as its argument and every variable, the password masked")
    func anOnCompleteHookGetsThePathAndTheVariables() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/a.bin", size: 100_000)
            let plain = server.url("/a.bin").absoluteString
            let url = plain.replacingOccurrences(of: "http://", with: "http://user:secret@")
            let hook = try script("hook.sh", in: directory, """
                { echo "arg=$1"; echo "count=$#"; env | grep '^HAUL_' | sort; } > '\(directory)/seen'
                echo "hook says hello"
                """)
            let sha = server.sha256("/a.bin")
            // An inherited HAUL_ERROR must not reach a completed download's hook.
            let run = try await CLI.haul(["get", url, "--checksum", "sha-256=\(sha)", "--on-complete", hook], in: directory, environment: ["HAUL_ERROR": "inherited"])
            #expect(run.status == 0, "\(run.stderr)")
            let path = directory + "/a.bin"
            let seen = variables(directory + "/seen")
            #expect(seen["arg"] == path, "the file is the one argument: \(seen)")
            #expect(seen["count"] == "1")
            #expect(seen["HAUL_ID"] == "1")
            #expect(seen["HAUL_URL"] == plain.replacingOccurrences(of: "http://", with: "http://user:***@"))
            #expect(seen["HAUL_PATH"] == path)
            #expect(seen["HAUL_STATE"] == "completed")
            #expect(seen["HAUL_BYTES"] == "100000")
            #expect(seen["HAUL_SHA256"] == sha)
            #expect(seen["HAUL_CHECKSUM"] == "sha-256=\(sha)")
            #expect(seen["HAUL_ERROR"] == nil)
            #expect(!((try? String(contentsOfFile: directory + "/seen", encoding: .utf8)) ?? "").contains("secret"))
            #expect(run.stdout.contains("[1] completed \(path)"), "\(run.stdout)")
            #expect(run.stdout.contains("[1] hook ran (exit 0, "), "haul get returns once its hook ran: \(run.stdout)")
            #expect(log(directory).contains("hook says hello"), "the hook's output goes to haul.log")
            #expect(log(directory).contains("hook ran"))
            let listed = try #require(try await listedHook(1, in: directory))
            #expect(listed["event"] as? String == "complete" && listed["status"] as? String == "ran" && listed["exit"] as? Int == 0, "\(listed)")

            // The JSON lines carry it too, on the line of the hook's end.
            try FileManager.default.removeItem(atPath: path)
            let json = try await CLI.haul(["get", "--json", plain, "-o", "b.bin", "--on-complete", hook], in: directory)
            #expect(json.status == 0, "\(json.stderr)")
            let events = json.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let hookLine = try #require(events.first { $0["event"] as? String == "hook" }, "\(json.stdout)")
            #expect((hookLine["hook"] as? [String: Any])?["status"] as? String == "ran", "\(hookLine)")
            #expect(variables(directory + "/seen")["HAUL_SHA256"] == nil, "no checksum was given: none checked")
        }
    }

    @Test("18.4: a slow hook is killed with its child at --hook-timeout, and the queue goes on meanwhile")
    func aSlowHookIsKilledAtItsLimit() async throws {
        try await CLI.withServer { server, directory in
            let hook = try script("slow.sh", in: directory, """
                echo $$ > '\(directory)/hook-'$HAUL_ID.pid
                sleep 60 &
                echo $! > '\(directory)/child-'$HAUL_ID.pid
                wait
                """)
            let started = Date()
            let run = try await getTwo(server, in: directory, hook: hook, ["--hook-timeout", "2s"])
            let seconds = Date().timeIntervalSince(started)
            #expect(run.status == 0, "a hook's end changes no exit status: \(run.stderr)")
            #expect(seconds < 15, "killed at 2 s, not after sleep 60: \(seconds) s")
            #expect(run.stdout.contains("[1] hook timed out after 2 s, killed"), "\(run.stdout)")
            // The second download ran while the first one's hook slept.
            let second = try #require(run.stdout.range(of: "[2] completed"))
            let killed = try #require(run.stdout.range(of: "[1] hook timed out"))
            #expect(second.lowerBound < killed.lowerBound, "\(run.stdout)")
            for name in ["hook-1", "child-1", "hook-2", "child-2"] {
                let pid = try #require(Self.pid(directory + "/\(name).pid"), "\(name)")
                #expect(try await eventually(timeout: 5, "\(name) (pid \(pid)) to be gone") { Self.ended(pid) })
            }
            let listed = try #require(try await listedHook(1, in: directory))
            #expect(listed["status"] as? String == "timed out" && listed["limit"] as? Double == 2, "\(listed)")
            #expect(log(directory).contains("timed out after 2 s, killed"))
        }
    }

    /// A hook that leaves a child holding its output (`xdg-open "$1" &`) ended when it exited: the
    /// wait for the rest of its output is two seconds at most (a tester's `sleep 20 &` held `haul
    /// get` for 20 s, past its 3 s limit, and a runner's row said `hook pending` meanwhile).
    @Test("18.4: a hook whose child holds its output ends when the hook exits")
    func aHookWhoseChildHoldsItsOutputEndsWithIt() async throws {
        try await CLI.withServer { server, directory in
            let hook = try script("leaves.sh", in: directory, """
                sleep 30 &
                echo $! > '\(directory)/child-'$HAUL_ID.pid
                exit 0
                """)
            let started = Date()
            let run = try await getTwo(server, in: directory, hook: hook, ["--hook-timeout", "20s"])
            let seconds = Date().timeIntervalSince(started)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(seconds < 15, "not the child's 30 s: \(seconds) s")
            #expect(run.stdout.contains("[1] hook ran (exit 0"), "\(run.stdout)")
            for id in [1, 2] {
                if let child = Self.pid(directory + "/child-\(id).pid") { kill(child, SIGKILL) }
            }
        }
    }

    @Test("18.4: a failing hook is logged with its status and output, and the next download still completes")
    func aFailingHookIsLoggedAndTheQueueGoesOn() async throws {
        try await CLI.withServer { server, directory in
            let hook = try script("fail.sh", in: directory, """
                echo "out of hook $HAUL_ID"
                echo "err of hook $HAUL_ID" >&2
                exit 3
                """)
            let run = try await getTwo(server, in: directory, hook: hook)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("[1] hook failed (exit 3, "), "\(run.stdout)")
            #expect(run.stdout.contains("[2] completed"), "\(run.stdout)")
            #expect(sha256(ofFile: directory + "/two.bin") == server.sha256("/two.bin"))
            let text = log(directory)
            for line in ["out of hook 1", "err of hook 1", "out of hook 2", "err of hook 2"] {
                #expect(text.contains(line), "\(line) in haul.log")
            }
            #expect(text.contains("failed (exit 3"), "the status in haul.log")
            let listed = try #require(try await listedHook(2, in: directory))
            #expect(listed["status"] as? String == "failed" && listed["exit"] as? Int == 3, "\(listed)")
        }
    }

    @Test("18.4: a hook's output reaches haul.log capped and stripped of escape sequences, with no terminal to write to")
    func aHooksOutputIsCappedAndClean() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/a.bin", size: 1000)
            // 1 MiB of output, an escape sequence, and an attempt at the controlling terminal.
            let hook = try script("loud.sh", in: directory, """
                if (: > /dev/tty) 2>/dev/null; then echo "HAS A TTY"; else echo "no tty here"; fi
                printf 'red \\033[31mtext\\033[0m\\n'
                head -c 1048576 /dev/zero | tr '\\0' 'x' | fold -w 100
                echo "the end"
                """)
            let run = try await CLI.haul(["get", server.url("/a.bin").absoluteString, "-d", directory, "--on-complete", hook], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("[1] hook ran (exit 0, "), "\(run.stdout)")
            let text = log(directory)
            #expect(text.utf8.count < 256 * 1024, "capped: haul.log has \(text.utf8.count) bytes")
            #expect(text.contains("no tty here") && !text.contains("HAS A TTY"), "a session of its own, no terminal")
            #expect(text.contains("line=red ?[31mtext?[0m"), "the line is there, its escape defused")
            #expect(!text.contains("\u{1B}"), "no escape sequence reaches the log")
            #expect(text.contains("more bytes of output not logged"), "says what was left out")
            #expect(!text.contains("the end"), "past the cap")
        }
    }

    @Test("18.4: an on-fail hook runs for a download that fails, with its part file and the reason")
    func anOnFailHookRunsForAFailedDownload() async throws {
        try await CLI.withServer { server, directory in
            let hook = try script("failed.sh", in: directory, """
                { echo "arg=$1"; env | grep '^HAUL_' | sort; } > '\(directory)/seen'
                """)
            let complete = try script("complete.sh", in: directory, "touch '\(directory)/wrong'")
            let run = try await CLI.haul(["get", server.url("/missing.bin").absoluteString, "--on-fail", hook, "--on-complete", complete], in: directory)
            #expect(run.status == 1)
            #expect(run.stdout.contains("[1] failed: HTTP 404"), "\(run.stdout)")
            #expect(run.stdout.contains("[1] hook ran (exit 0, "), "\(run.stdout)")
            let seen = variables(directory + "/seen")
            #expect(seen["HAUL_STATE"] == "failed")
            #expect(seen["HAUL_ERROR"]?.contains("HTTP 404") == true, "\(seen)")
            #expect(seen["arg"] == directory + "/missing.bin.part" && seen["HAUL_PATH"] == seen["arg"], "\(seen)")
            #expect(!FileManager.default.fileExists(atPath: directory + "/wrong"), "only the hook of the ending runs")
            let listed = try #require(try await listedHook(1, in: directory))
            #expect(listed["event"] as? String == "fail" && listed["status"] as? String == "ran", "\(listed)")
        }
    }

    @Test("18.4: a crash between the committed completion and the hook's end runs the hook again on the next start")
    func aCrashWhileTheHookRunsRunsItAgain() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/c.bin", size: 40_000)
            let url = server.url("/c.bin").absoluteString
            let runs = directory + "/runs"
            // The first run signals the test and sleeps; the second returns at once.
            let hook = try script("twice.sh", in: directory, """
                echo "$1" >> '\(runs)'
                echo $$ > '\(directory)/hook.pid'
                if [ "$(wc -l < '\(runs)')" -eq 1 ]; then sleep 30; fi
                """)
            let first = try HaulProcess(["get", url, "--on-complete", hook], in: directory, state: directory + "/.state")
            #expect(try await eventually("the hook to start") { FileManager.default.fileExists(atPath: directory + "/hook.pid") })
            first.send(SIGKILL)
            _ = try await first.wait()
            let sleeper = try #require(Self.pid(directory + "/hook.pid"))
            defer { kill(-sleeper, SIGKILL) }
            let pending = try #require(try await listedHook(1, in: directory))
            #expect(pending["status"] as? String == "pending", "\(pending)")

            let second = try await CLI.haul(["get", url, "--on-complete", hook], in: directory)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdout.contains("[1] hook ran (exit 0, "), "\(second.stdout)")
            let lines = ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n")
            #expect(lines == [Substring(directory + "/c.bin"), Substring(directory + "/c.bin")], "ran twice: \(lines)")
            #expect(server.requests("/c.bin").count == 1, "the file was not fetched again")
            let ran = try #require(try await listedHook(1, in: directory))
            #expect(ran["status"] as? String == "ran", "\(ran)")
        }
    }

    @Test("18.4: a hook that cannot run is refused at the start with one line, exit 2, and nothing changes", arguments: [
        (["--on-complete", "/no/such/program"], "haul: error: --on-complete: /no/such/program does not exist"),
        (["--on-fail", "no-such-program-of-haul"], "haul: error: --on-fail: no program 'no-such-program-of-haul' in PATH"),
        (["--on-complete", "notify-send done"], "haul: error: --on-complete: no program 'notify-send done' in PATH (a hook is one program, run without a shell and without arguments: put the command in a script)"),
        (["--on-complete", "/tmp"], "haul: error: --on-complete: /tmp is a directory"),
        (["--on-complete", "./.hooks/plain.txt"], "haul: error: --on-complete: ./.hooks/plain.txt is not executable"),
        (["--hook-timeout", "soon"], "haul: error: --hook-timeout must be a duration like 30s, 10m, 1h or a number of seconds, not 'soon'"),
        (["--hook-timeout", "0"], "haul: error: --hook-timeout must be between 1 second and 24 hours"),
    ])
    func aHookThatCannotRunIsBadInput(_ arguments: [String], _ message: String) async throws {
        try await CLI.withServer { server, directory in
            server.serve("/x.bin", size: 1000)
            // A file that is not executable (hidden: not among the files a download would leave).
            try FileManager.default.createDirectory(atPath: directory + "/.hooks", withIntermediateDirectories: true)
            try "echo\n".write(toFile: directory + "/.hooks/plain.txt", atomically: true, encoding: .utf8)
            #expect(chmod(directory + "/.hooks/plain.txt", 0o644) == 0)
            let run = try await CLI.haul(["get", server.url("/x.bin").absoluteString] + arguments, in: directory)
            #expect(run.status == 2)
            #expect(run.stderr == message + "\n", "\(run.stderr)")
            #expect(CLI.files(directory).isEmpty, "nothing downloaded")
            #expect(!FileManager.default.fileExists(atPath: directory + "/.state"), "no queue created")
            #expect(server.requests().isEmpty)
        }
    }

    @Test("18.4: the config's on-complete and hook-timeout are used, and a bad one names its line")
    func theConfigKeysWork() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/k.bin", size: 1000)
            let hook = try script("k.sh", in: directory, "echo \"$HAUL_STATE\" > '\(directory)/seen'")
            try FileManager.default.createDirectory(atPath: directory + "/.config/haul", withIntermediateDirectories: true)
            try "on-complete = \(hook)\nhook-timeout = 30\n".write(toFile: directory + "/.config/haul/config", atomically: true, encoding: .utf8)
            let run = try await CLI.haul(["get", server.url("/k.bin").absoluteString], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            #expect((try? String(contentsOfFile: directory + "/seen", encoding: .utf8)) == "completed\n")

            try "on-fail = /no/such/hook\n".write(toFile: directory + "/.config/haul/config", atomically: true, encoding: .utf8)
            let bad = try await CLI.haul(["get", server.url("/k.bin").absoluteString], in: directory)
            #expect(bad.status == 2)
            #expect(bad.stderr == "haul: error: the config's on-fail: /no/such/hook does not exist\n", "\(bad.stderr)")
            let list = try await CLI.haul(["list"], in: directory)
            #expect(list.status == 0, "a command that runs no hook does not check it: \(list.stderr)")
        }
    }
}
