import CSplice
import Synchronization

/// Starts a file's written bytes on their way to disk while the body still comes, for a download
/// that is fsync'd at the end: every `step` bytes, `sync_file_range(SYNC_FILE_RANGE_WRITE)` over the
/// range written since the last start, which waits for nothing. The disk then works beside the
/// network, and the fsync that makes the file durable waits for the last few MiB instead of the
/// whole file (issue 20: a durable 1 GiB took 1.2 s, half of it the fsync at the end).
///
/// Only a head start: what is durable is still decided by fsync, never by this.
final class EarlyWriteback: Sendable {
    /// Bytes written between two starts.
    static let step = 8 << 20

    /// The range written since the last start (the parts of a segmented file write in several
    /// places: it covers them all), and how many bytes.
    private let written = Mutex<(low: Int64, high: Int64, count: Int)?>(nil)

    /// `count` bytes were written at `offset` of `descriptor`.
    func wrote(_ count: Int, at offset: Int64, to descriptor: Int32) {
        guard count > 0 else { return }
        let end = offset + Int64(count)
        let due = written.withLock { written -> (Int64, Int64)? in
            let range = written.map { (min($0.low, offset), max($0.high, end), $0.count + count) } ?? (offset, end, count)
            guard range.2 >= Self.step else {
                written = range
                return nil
            }
            written = nil
            return (range.0, range.1 - range.0)
        }
        if let (start, length) = due { _ = haul_start_writeback(descriptor, start, length) }
    }
}
