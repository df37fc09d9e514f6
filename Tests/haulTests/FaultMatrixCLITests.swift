import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The rows of the README's fault matrix that the real binary must keep: what reaches the
/// terminal and the log, and bad input refused before any request.
@Suite(.serialized) struct FaultMatrixCLITests {
    /// Bytes no terminal output of haul may carry: C0 controls but newline, DEL and the C1 range.
    static func controls(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }
    }

    /// A name and a URL with escape sequences, and a 404 whose URL carries one.
    static func hostile(_ server: LoopbackServer) -> [String] {
        var faults = Faults()
        faults.contentDisposition = "attachment; filename*=UTF-8''t%1B%5D0%3Bpwned%07%1B%5B2J%C2%9B1m.bin"
        server.serve("/named", size: 20_000, faults: faults)
        server.serve("/u%1B%5B31m%07x.bin", size: 20_000)
        return [
            server.url("/named").absoluteString, server.url("/u%1B%5B31m%07x.bin").absoluteString,
            server.url("/missing%1B%5D0%3Bpwned%07").absoluteString,
        ]
    }

    @Test("7: escape sequences in names, URLs and errors reach neither haul get's output nor the log")
    func escapesNeverReachTheOutputOrTheLog() async throws {
        try await CLI.withServer { server, directory in
            let urls = Self.hostile(server)
            for json in [false, true] {
                let state = directory + "/.state-\(json)"
                try FileManager.default.createDirectory(atPath: directory + "/\(json)", withIntermediateDirectories: true)
                let run = try await HaulProcess(["get"] + (json ? ["--json"] : []) + urls + ["-d", directory + "/\(json)"], in: directory, state: state)
                    .wait()
                #expect(run.status == 1, "the 404 fails its download: \(run.stdout)")
                #expect(run.stdout.contains("404"), "\(run.stdout)")
                #expect(Self.controls(run.stdout).isEmpty, "stdout: \(run.stdout.debugDescription)")
                #expect(Self.controls(run.stderr).isEmpty, "stderr: \(run.stderr.debugDescription)")
                let log = try String(contentsOfFile: state + "/haul.log", encoding: .utf8)
                #expect(Self.controls(log).isEmpty, "the log holds \(Self.controls(log))")
                #expect(log.contains("404"), "the log says what happened")
            }
            #expect(CLI.files(directory + "/false").sorted() == ["t]0;pwned[2J1m.bin", "u[31mx.bin"])
        }
    }

    @Test("7: escape sequences in names, URLs and errors never reach the terminal UI")
    func escapesNeverReachTheTerminalUI() async throws {
        try await CLI.withServer { server, directory in
            let urls = Self.hostile(server)
            let state = directory + "/state"
            let tmux = try await TmuxSession(TmuxSession.haulCommand(["-d", directory] + urls, state: state, in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("the three rows") { rows in
                rows.contains { $0.contains("completed") } && rows.contains { $0.contains("404") }
            }
            let title = await tmux.title
            #expect(!title.contains("pwned"), "an OSC title sequence reached the terminal: \(title)")
            let screen = await tmux.screen(colors: true).joined(separator: "\n")
            #expect(!screen.contains("\u{1B}[2J") && !screen.contains("\u{1B}]"), "only haul's own styles reach the screen")
            let text = await tmux.text
            #expect(text.contains("u[31mx.bin") && text.contains("missing]0;pwned"), "names shown defused: \(text)")
        }
    }

    @Test("9: a CR or LF in a header, a user agent or a URL is refused before any request", arguments: [
        ["-H", "X-A: b\r\nX-Evil: 1"], ["-H", "X-A: b\nX-Evil: 1"], ["--user-agent", "a\r\nX-Evil: 1"], ["URL-CRLF"],
    ])
    func crlfIsRefusedBeforeAnyRequest(arguments: [String]) async throws {
        try await CLI.withServer { server, directory in
            server.serve("/a.bin", size: 100)
            let url = server.url("/a.bin").absoluteString
            let run: HaulProcess.Run
            if arguments == ["URL-CRLF"] {
                run = try await HaulProcess(["get", url + "\r\nX-Evil: 1"], in: directory, state: directory + "/.state").wait()
            } else {
                run = try await HaulProcess(["get", url] + arguments, in: directory, state: directory + "/.state").wait()
            }
            #expect(run.status == 2, "\(run.stdout) \(run.stderr)")
            #expect(run.stderr.hasPrefix("haul: error: "), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "one line: \(run.stderr.debugDescription)")
            #expect(Self.controls(run.stderr).isEmpty, "\(run.stderr.debugDescription)")
            #expect(server.requests().isEmpty, "nothing was sent")
            #expect(CLI.files(directory).filter { !$0.hasPrefix(".") }.isEmpty)
        }
    }
}
