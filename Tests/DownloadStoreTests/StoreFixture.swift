import DownloadCore
import Foundation
import TestSupport

/// A queue database's place for one test: a temporary directory removed when the test ends, the
/// database file in it, and downloads to commit.
struct StoreFixture {
    let scratch: TemporaryDirectory

    init() throws {
        scratch = try TemporaryDirectory("haul-store")
    }

    var directory: String { scratch.path }

    /// The database file (not created until opened).
    var path: String { scratch.path("queue.sqlite") }

    /// Download `id` of `url` (`https://example.com/ID.iso` unless given) to `/data/ID.iso`, in `state`.
    func download(_ id: Int64, _ state: DownloadState = .queued, url: String? = nil) throws -> Download {
        guard let parsed = URL(string: url ?? "https://example.com/\(id).iso") else { throw FixtureError.badURL }
        var download = Download(id: DownloadID(id), url: parsed, destination: .file("/data/\(id).iso"), partPath: "/data/\(id).iso.part")
        download.state = state
        return download
    }

    enum FixtureError: Error {
        case badURL
    }
}
