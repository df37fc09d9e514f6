import DownloadCore
import Foundation
import Testing

/// `haul list --json` and the control socket print one object per download, and the list's bytes
/// stay what `JSONSerialization` wrote before the object moved into DownloadCore.
@Suite struct QueueListingTests {
    /// The list's former code, kept here as the reference, with the hook added since (`HookRun`'s
    /// own JSON, null for none) and the download's own limit (null for none).
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
                "path": QueueListing.path(download),
                "url": download.url.redactingPassword,
                "error": QueueListing.error(download).map { $0 as Any } ?? NSNull(),
                "checksum": download.options.checksum.map { $0.description as Any } ?? NSNull(),
                "header_names": download.options.headers.map(\.name),
                "hook": try download.hook.map { try JSONSerialization.jsonObject(with: JSONEncoder().encode($0)) } ?? NSNull(),
                "limit": download.limit.map { $0 as Any } ?? NSNull(),
            ]
        }
        return try JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])
    }

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
        rich.options = RequestOptions(headers: [HeaderField(name: "Authorization", value: "t0ken"), HeaderField(name: "X-A", value: "b")],
                                      checksum: Checksum(algorithm: .sha256, hex: String(repeating: "ab", count: 32)))
        rich.completedPaths = ["/d/done/file"]
        rich.hook = HookRun(event: .fail, status: .exited(code: 3, seconds: 1.25))
        rich.limit = 512 * 1024
        var paused = Download(id: DownloadID(7), url: try #require(URL(string: "http://h/p")), destination: .directory("/"), partPath: "/p.part")
        paused.state = .paused
        paused.pausedByShutdown = true
        return [plain, rich, paused]
    }

    @Test func listBytesAreTheFormerSerialization() throws {
        let downloads = try downloads()
        let now = QueueListing.json(downloads.map { QueueListing.object(for: $0) })
        #expect(String(decoding: now, as: UTF8.self) == String(decoding: try former(downloads), as: UTF8.self))
        #expect(String(decoding: QueueListing.json([]), as: UTF8.self) == "[]")
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
}
