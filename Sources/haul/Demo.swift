import ArgumentParser
import CursesBackend
import DownloadCore
import DownloadStore
import Foundation
import LoopbackServer

/// `haul demo`: the product at work without internet, against a local server with sample files.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Try haul offline: a local server with a dozen sample downloads, in the terminal UI.",
        discussion: """
        Starts an HTTP server on 127.0.0.1 (a free port) that serves sample files slowly enough to \
        watch, including one whose server ignores Range, one that changes while paused, one that fails \
        twice before it works and one without a Content-Length; then opens the terminal UI on them. \
        The queue and the files go to a temporary directory, removed when you quit, unless --state is \
        given: then a later `haul demo --state DIR` resumes where you left off. Quitting stops the server.
        """
    )

    @OptionGroup var state: StateOptions

    @Option(name: [.short, .customLong("dir")], help: ArgumentHelp("Directory for the sample files (default: downloads/ in the state directory).", valueName: "dir"))
    var directory: String?

    @OptionGroup var session: SessionOptions
    @OptionGroup var display: DisplayOptions

    /// One sample: its path on the server, size, rate and what it shows.
    struct Sample {
        var path: String
        var size: Int
        var bytesPerSecond: Int
        var faults = Faults()
        /// Added to the URL, not to the path the server serves.
        var query = ""
    }

    static let keysToTry = "demo: space pause/resume · Enter details · a add · c cancel · < > run fewer/more · ? help · q quit"

    /// A dozen downloads of 10 s to 2 min each at their rates.
    static var samples: [Sample] {
        let kib = 1024
        let mib = 1024 * kib
        let large = Sample(path: "/large-pause-and-resume-me.iso", size: 128 * mib, bytesPerSecond: 1200 * kib)
        var changes = Sample(path: "/changes-while-paused.tar", size: 16 * mib, bytesPerSecond: 400 * kib)
        changes.faults.changeOnRangeRequests = 1
        var flaky = Sample(path: "/fails-twice-then-works.zip", size: 6 * mib, bytesPerSecond: 300 * kib)
        flaky.faults.failFirst = 2
        flaky.faults.retryAfter = "3"
        var noRanges = Sample(path: "/no-ranges-server.bin", size: 10 * mib, bytesPerSecond: 400 * kib)
        noRanges.faults.ignoreRange = true
        var noLength = Sample(path: "/no-content-length.log", size: 5 * mib, bytesPerSecond: 250 * kib)
        noLength.faults.chunked = true
        var named = Sample(path: "/download", size: 3 * mib, bytesPerSecond: 150 * kib)
        named.faults.contentDisposition = "attachment; filename=\"quarterly-report-Q3.pdf\""
        named.query = "?id=42"
        var weak = Sample(path: "/weak-etag-mirror.img", size: 6 * mib, bytesPerSecond: 300 * kib)
        weak.faults.weakETag = true
        // The ones that show something first, so they run within the first four.
        var list = [
            large, changes, flaky, noRanges,
            Sample(path: "/dataset-2026-11.csv.gz", size: 40 * mib, bytesPerSecond: 800 * kib),
            noLength,
            Sample(path: "/podcast-episode-142.mp3", size: 24 * mib, bytesPerSecond: 600 * kib),
            named,
            Sample(path: "/linux-6.12-docs.tar.xz", size: 12 * mib, bytesPerSecond: 400 * kib),
            weak,
            Sample(path: "/photos-2026.zip", size: 8 * mib, bytesPerSecond: 300 * kib),
            Sample(path: "/release-notes.pdf", size: 2 * mib, bytesPerSecond: 120 * kib),
        ]
        for index in list.indices { list[index].faults.throttleBytesPerSecond = list[index].bytesPerSecond }
        return list
    }

    func run() async throws {
        let settings = try display.apply(to: session.apply(to: state.settings()))
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else {
            throw UsageError(message: "haul demo needs a terminal on stdin and stdout")
        }
        try UI.checkTerminal()

        // A temporary queue unless one was named (a named one outlives the demo); never the
        // person's own queue.
        var temporary: String?
        if state.directory == nil {
            let template = (NSTemporaryDirectory() as NSString).appendingPathComponent("haul-demo-XXXXXX")
            var bytes = Array(template.utf8CString)
            guard let made = mkdtemp(&bytes) else { throw UsageError(message: "cannot create a temporary directory for the demo") }
            temporary = String(cString: made)
        }
        defer { if let temporary { try? FileManager.default.removeItem(atPath: temporary) } }
        let store = try OpenStore(path: temporary.map { $0 + "/state" } ?? state.resolvedPath(settings))
        let working = FileManager.default.currentDirectoryPath
        let downloads = directory.map { LocalPath.absolute($0, in: working) } ?? (temporary.map { $0 + "/downloads" } ?? store.directory.path + "/downloads")
        do {
            try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        } catch {
            throw UsageError(message: "cannot create \(downloads): \(LocalPath.reason(error))")
        }
        try LocalPath.checkWritableDirectory(downloads)

        let server = try await Self.startServer(portFile: store.directory.path + "/demo-port")
        let samples = Self.samples
        for sample in samples {
            server.serve(sample.path, size: sample.size, faults: sample.faults)
        }
        // The first run adds the samples; a later run on the same --state resumes them.
        let requests = store.queue.downloads.isEmpty
            ? samples.map { AddOptions.Request(url: server.url($0.path + $0.query), destination: .directory(downloads), options: RequestOptions()) }
            : []
        do {
            try await UI.runTerminal(
                store: store, settings: settings, requests: requests, downloadDirectory: downloads,
                defaults: RequestOptions(), banner: Self.keysToTry, fallbackMaxActive: 4, handover: nil
            )
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
        if let temporary {
            print("haul demo: server stopped; removed \(temporary)")
        } else {
            print("haul demo: server stopped; the queue stays in \(store.directory.path)")
            print("resume it with: haul demo --state \(store.directory.path)")
        }
    }

    /// The server on the port a previous demo of this queue used (its URLs are in the queue), else
    /// on a free one.
    static func startServer(portFile: String) async throws -> LoopbackServer {
        let previous = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0.trimmingWhitespace(newlines: true)) }
        var reused: LoopbackServer?
        if let previous { reused = try? await LoopbackServer.start(port: previous) }
        let started: LoopbackServer
        if let reused {
            started = reused
        } else {
            do {
                started = try await LoopbackServer.start()
            } catch {
                throw UsageError(message: "cannot start the demo server on 127.0.0.1: \(LoopbackServer.words(for: error))")
            }
        }
        try? "\(started.port)\n".write(toFile: portFile, atomically: true, encoding: .utf8)
        return started
    }
}
