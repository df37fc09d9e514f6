import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Issue 16's smaller faults on the real binary: checksum mismatches in full, and an unreadable
/// default config.
@Suite struct FilesCLITests {
    @Test("16.10: a checksum mismatch shows both digests in full")
    func aChecksumMismatchShowsBothDigests() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/sum.bin", size: 50_000)
            let wrong = String(repeating: "ab", count: 32)
            let run = try await CLI.haul(["get", server.url("/sum.bin").absoluteString, "--checksum", "sha-256=\(wrong)"], in: directory)
            #expect(run.status == 1)
            #expect(run.stdout.contains("sha-256 mismatch: expected \(wrong), got \(server.sha256("/sum.bin")) (kept as .part)"), "\(run.stdout)")
            let json = try await CLI.haul(["get", server.url("/sum.bin").absoluteString, "--checksum", "sha-256=\(wrong)", "--json"], in: directory)
            #expect(json.stdout.contains(server.sha256("/sum.bin")), "\(json.stdout)")
        }
    }

    @Test("16.10: an unreadable default config (a directory, mode 000) is treated as absent; a named one is an error")
    func anUnreadableDefaultConfigIsAbsent() async throws {
        let scratch = try TemporaryDirectory("haul-cfg")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        try FileManager.default.createDirectory(atPath: directory + "/.config/haul/config", withIntermediateDirectories: true)
        let asDirectory = try await CLI.haul(["add", "http://example.com/a"], in: directory)
        #expect(asDirectory.status == 0, "\(asDirectory.stderr)")
        let named = try await CLI.haul(["add", "http://example.com/b", "--config", directory + "/.config/haul/config"], in: directory)
        #expect(named.status == 2)
        #expect(named.stderr.hasPrefix("haul: error: cannot read the config file \(directory)/.config/haul/config"), "\(named.stderr)")
        let fromEnvironment = try await CLI.haul(["add", "http://example.com/c"], in: directory, environment: ["HAUL_CONFIG": directory + "/.config/haul/config"])
        #expect(fromEnvironment.status == 2)

        // Mode 000 stops every user but root, who reads anything: tested where it can fail.
        try FileManager.default.removeItem(atPath: directory + "/.config/haul/config")
        try "max-active = 2\n".write(toFile: directory + "/.config/haul/config", atomically: true, encoding: .utf8)
        #expect(chmod(directory + "/.config/haul/config", 0) == 0)
        if getuid() != 0 {
            let unreadable = try await CLI.haul(["add", "http://example.com/d"], in: directory)
            #expect(unreadable.status == 0, "\(unreadable.stderr)")
        }
    }

    /// A person's `NAME.part` in the download directory is theirs. Found by use: `haul get` of
    /// NAME restarted over it (`no validator or length to check a resume against`) and deleted it.
    @Test func aPersonsPartFileIsLeftAlone() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/doc.pdf", size: 30_000)
            let notes = directory + "/doc.pdf.part"
            #expect(FileManager.default.createFile(atPath: notes, contents: Data("my own notes\n".utf8)))
            let run = try await CLI.haul(["get", server.url("/doc.pdf").absoluteString, "-d", directory], in: directory)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(run.stdout.contains("[1] restarted from zero: \(notes) holds bytes this download did not write (left alone); fetching into \(directory)/doc.pdf.1.part\n"), "\(run.stdout)")
            #expect(FileManager.default.contents(atPath: notes) == Data("my own notes\n".utf8))
            #expect(run.stdout.contains("[1] completed \(directory)/doc.pdf.1 "), "named as its part file: \(run.stdout)")
            #expect(sha256(ofFile: directory + "/doc.pdf.1") == server.sha256("/doc.pdf"))
        }
    }
}
