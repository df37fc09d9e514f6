import DownloadCore
import Foundation
import Testing

/// `haul list --json`, `haul get --json` and the control socket print one object per download, and
/// the list's bytes stay what `JSONSerialization` wrote before the object moved into DownloadCore.
@Suite struct QueueListingTests {
    /// The list's former code, kept here as the reference, with the hook added since (`HookRun`'s
    /// own JSON, null for none), the download's own limit (null for none), and the two keys `haul get
    /// --json` had alone until one shape served both: `restart_reason` and `waiting_for`.
    private func former(_ downloads: [Download]) throws -> Data {
        let objects: [[String: Any]] = try downloads.map { download in
            [
                "id": download.id.rawValue,
                "state": download.state.word,
                "bytes": download.bytesOnDisk,
                "total": download.totalBytes.map { $0 as Any } ?? NSNull(),
                "resumed_from": download.resumeOffset.map { $0 as Any } ?? NSNull(),
                "resumes": download.resumeCount,
                "restarts": download.restartCount,
                "restart_reason": download.restartReason.map { $0 as Any } ?? NSNull(),
                "path": QueueListing.path(download),
                "url": download.url.redactingPassword,
                "error": QueueListing.error(download).map { $0 as Any } ?? NSNull(),
                "waiting_for": QueueListing.Waiting(download.state, at: Self.now).map { $0.rawValue as Any } ?? NSNull(),
                "checksum": download.options.checksum.map { $0.description as Any } ?? NSNull(),
                "header_names": download.options.headers.map(\.name),
                "hook": try download.hook.map { try JSONSerialization.jsonObject(with: JSONEncoder().encode($0)) } ?? NSNull(),
                "limit": download.limit.map { $0 as Any } ?? NSNull(),
            ]
        }
        return try JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])
    }

    private static let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func downloads() throws -> [Download] {
        var plain = Download(id: DownloadID(1), url: try #require(URL(string: "http://h/a%20b/c.bin?x=1&y=/z")), destination: .directory("/tmp"), partPath: "/tmp/c.bin.part")
        plain.state = .queued
        var rich = Download(id: DownloadID(42), url: try #require(URL(string: "https://user:secret@h:8443/caf%C3%A9.iso")), destination: .file("/d/\"q\"\\ é 😀.iso"), partPath: "/d/x.part")
        rich.state = .failed(reason: "server said 404 \"Not Found\"\t<html>/\u{01}")
        rich.bytesOnDisk = 1 << 40
        rich.totalBytes = 1 << 41
        rich.resumeOffset = 12345
        rich.resumeCount = 3
        rich.restartCount = 2
        rich.restartReason = "the server's file changed (ETag \"a\" became \"b\")"
        rich.options = RequestOptions(headers: [HeaderField(name: "Authorization", value: "t0ken"), HeaderField(name: "X-A", value: "b")],
                                      checksum: Checksum(algorithm: .sha256, hex: String(repeating: "ab", count: 32)))
        rich.completedPaths = ["/d/done/file"]
        rich.hook = HookRun(event: .fail, status: .exited(code: 3, seconds: 1.25))
        rich.limit = 512 * 1024
        var paused = Download(id: DownloadID(7), url: try #require(URL(string: "http://h/p")), destination: .directory("/"), partPath: "/p.part")
        paused.state = .paused
        paused.pausedByShutdown = true
        var retrying = Download(id: DownloadID(8), url: try #require(URL(string: "http://h/r")), destination: .directory("/"), partPath: "/r.part")
        retrying.state = .waiting(until: Self.now.addingTimeInterval(30), reason: "HTTP 503")
        var due = Download(id: DownloadID(9), url: try #require(URL(string: "http://h/d")), destination: .directory("/"), partPath: "/d.part")
        due.state = .waiting(until: Self.now.addingTimeInterval(-1), reason: "HTTP 503")
        var room = Download(id: DownloadID(10), url: try #require(URL(string: "http://h/s")), destination: .directory("/"), partPath: "/s.part")
        room.state = .waitingForSpace(reason: "waiting for disk space (disk full, 0 B free, floor 245 KiB)")
        return [plain, rich, paused, retrying, due, room]
    }

    @Test func listBytesAreTheFormerSerialization() throws {
        let downloads = try downloads()
        let now = QueueListing.json(downloads.map { QueueListing.object(for: $0, now: Self.now) })
        #expect(String(decoding: now, as: UTF8.self) == String(decoding: try former(downloads), as: UTF8.self))
        #expect(String(decoding: QueueListing.json([]), as: UTF8.self) == "[]")
    }

    /// `haul list`'s line under a row calls an error an error, and nothing else: a download that
    /// stopped with its haul said `error: stopped when haul exited …`.
    @Test func theListsNoteCallsOnlyAnErrorAnError() throws {
        let notes = try downloads().map(QueueListing.note)
        #expect(notes == [
            nil,
            "error: server said 404 \"Not Found\"\t<html>/\u{01}",
            "paused: stopped when haul exited; resumes when haul runs the queue or gets it again",
            "error: HTTP 503",
            "error: HTTP 503",
            "waiting for disk space (disk full, 0 B free, floor 245 KiB)",
        ])
    }

    /// A URL asked for by two requesters is one download with a file for each: the file a
    /// requester asked for is the one in its destination (`haul get -d b` named `a`'s file).
    @Test func eachRequesterHasItsOwnCompletedFile() throws {
        var download = Download(id: DownloadID(3), url: try #require(URL(string: "http://h/x.bin")), destination: .directory("/a"), partPath: "/a/x.bin.part")
        download.extraDestinations = [.directory("/b"), .file("/c/named.bin")]
        #expect(download.completedPath(for: .directory("/b")) == nil, "nothing before completion")
        download.completedPaths = ["/a/x.bin", "/b/x.bin", "/c/named.bin"]
        #expect(download.completedPath(for: .directory("/a")) == "/a/x.bin")
        #expect(download.completedPath(for: .directory("/b")) == "/b/x.bin")
        #expect(download.completedPath(for: .file("/c/named.bin")) == "/c/named.bin")
        #expect(download.completedPath(for: .directory("/elsewhere")) == "/a/x.bin", "not a requester: the first file")
    }

    /// A completed row whose file was not placed yet (its commit comes before the move; a kill -9
    /// may end haul between them) is `downloading` at its part file until placed: a tester's list
    /// after a kill said `completed` of part files, some moved away already.
    @Test func aCompletedRowNotYetPlacedIsStillDownloading() throws {
        var download = Download(id: DownloadID(4), url: try #require(URL(string: "http://h/f.bin")), destination: .directory("/d"), partPath: "/d/f.bin.part")
        download.state = .completed
        download.bytesOnDisk = 10
        let unplaced = QueueListing.object(for: download)
        #expect(unplaced.state == "downloading" && unplaced.path == "/d/f.bin.part")
        download.completedPaths = ["/d/f.bin"]
        let placed = QueueListing.object(for: download)
        #expect(placed.state == "completed" && placed.path == "/d/f.bin")
    }

    @Test func liveObjectsAddTheSpeedOnly() throws {
        var download = try downloads()[0]
        download.bytesPerSecond = 1234.6
        let data = QueueListing.json([QueueListing.object(for: download, live: true)])
        let object = try #require((try JSONSerialization.jsonObject(with: data) as? [[String: Any]])?.first)
        #expect(object["speed"] as? Int == 1235)
        let stored = try #require((try JSONSerialization.jsonObject(with: QueueListing.json([QueueListing.object(for: download)])) as? [[String: Any]])?.first)
        #expect(Set(object.keys).subtracting(stored.keys) == ["speed"])
        #expect(!String(decoding: data, as: UTF8.self).contains("secret"))
    }

    @Test func aWaitingDownloadSaysWhatItWaitsForAndADueRetrySaysItIsDue() throws {
        let objects = try downloads().map { QueueListing.object(for: $0, now: Self.now) }
        #expect(objects.map(\.waitingFor) == [nil, nil, nil, .retry, .retryDue, .diskSpace])
        let data = QueueListing.json(objects)
        let parsed = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        #expect(parsed.map { $0["waiting_for"] as? String } == [nil, nil, nil, "retry", "retry due", "disk space"])
        #expect(parsed.allSatisfy { $0.keys.contains("waiting_for") }, "null, never left out")
    }

    @Test func aGetLineIsTheListsObjectWithItsEvent() throws {
        for download in try downloads() {
            // Given the line `haul get --json` prints and the object `haul list --json` (live) prints
            let line = try #require(try JSONSerialization.jsonObject(with: QueueListing.eventLine("state", download, now: Self.now)) as? [String: Any])
            let listed = try #require(
                (try JSONSerialization.jsonObject(with: QueueListing.json([QueueListing.object(for: download, live: true, now: Self.now)])) as? [[String: Any]])?.first
            )
            // Then the line is the object with `event` beside its keys: same keys, same values
            #expect(line["event"] as? String == "state")
            var rest = line
            rest["event"] = nil
            #expect(NSDictionary(dictionary: rest).isEqual(to: listed), "\(line) against \(listed)")
            // And byte for byte the same encoder: sorted keys, `event` in its place among them
            let text = String(decoding: QueueListing.eventLine("state", download, now: Self.now), as: UTF8.self)
            let listedText = String(decoding: QueueListing.json([QueueListing.object(for: download, live: true, now: Self.now)]), as: UTF8.self)
            #expect(text.replacingOccurrences(of: #""event":"state","#, with: "") == listedText.dropFirst().dropLast(), "\(text) against \(listedText)")
        }
    }

    @Test func linesAboutNoDownloadsStateUseTheSameEncoder() throws {
        let note = String(decoding: QueueListing.eventLine("note", id: DownloadID(3), ["message": "a/b changed on disk"]), as: UTF8.self)
        #expect(note == #"{"event":"note","id":3,"message":"a\/b changed on disk"}"#)
        let unsaved = String(decoding: QueueListing.eventLine("unsaved", ["error": "cannot save the queue: disk full"]), as: UTF8.self)
        #expect(unsaved == #"{"error":"cannot save the queue: disk full","event":"unsaved"}"#)
    }
}
