import DownloadCore
import Foundation
import TerminalUI

/// wcwidth answers for CJK and emoji only in a UTF-8 locale; the tests measure as a UTF-8 terminal does.
let utf8Locale: Bool = setlocale(LC_ALL, "C.UTF-8") != nil

enum Fixture {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let hostileName = "\u{1B}[31mevil\u{1B}]0;pwned\u{07}\u{202E}name\r\n\u{9B}2J.bin"

    static func download(_ id: Int64, _ name: String, _ state: DownloadState, done: Int64 = 0, total: Int64? = nil) -> Download {
        let url = URL(string: "https://user:secret@example.com/files/\(id)") ?? URL(fileURLWithPath: "/")
        var download = Download(id: DownloadID(id), url: url, destination: .file("/downloads/\(name)"), partPath: "/downloads/\(id).part")
        download.state = state
        download.bytesOnDisk = done
        download.totalBytes = total
        return download
    }

    /// One download per state, with a long, a CJK, an emoji and a hostile name among them.
    static var downloads: [Download] {
        var running = download(1, "ubuntu-24.04.1-desktop-amd64.iso", .downloading, done: 2_400_000_000, total: 6_000_000_000)
        running.bytesPerSecond = 5_500_000
        running.resumeOffset = 1_300_000_000
        running.resumeCount = 2
        running.bytesSavedByResume = 1_300_000_000
        running.etag = "\"abc123\""
        running.lastStatus = 206
        let queued = download(2, "日本語のファイル名.zip", .queued)
        let paused = download(3, "🎉 party 🎉.tar.gz", .paused, done: 50_000_000, total: 200_000_000)
        let waiting = download(4, hostileName, .waiting(until: now.addingTimeInterval(12), reason: "connection refused"), done: 1024, total: 4096)
        let completed = download(5, String(repeating: "very-long-name-", count: 14) + "end.tar.xz", .completed, done: 123_456_789, total: 123_456_789)
        let failed = download(6, "missing.bin", .failed(reason: "HTTP 404 Not Found"))
        let cancelled = download(7, "cancelled.img", .cancelled)
        return [running, queued, paused, waiting, completed, failed, cancelled]
    }

    static func state(width: Int, height: Int, downloads: [Download] = Fixture.downloads, unicode: Bool = true) -> ViewState {
        var snapshot = SessionSnapshot(downloads: downloads, maxActive: 3)
        snapshot.space = DiskReading(free: 42_000_000_000, capacity: 500_000_000_000, floor: 1 << 30, filesystem: 1)
        return ViewState(snapshot: snapshot, now: now, width: width, height: height, unicode: unicode)
    }
}
