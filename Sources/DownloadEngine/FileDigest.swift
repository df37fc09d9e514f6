import Crypto
import DownloadCore
import Foundation

/// The digest of a finished part file, read in 1 MiB blocks on the file-work threads.
enum FileDigest {
    /// Lower-case hex of the file's digest, or nil when it cannot be read.
    static func hex(of path: String, _ algorithm: Checksum.Algorithm) async -> String? {
        await FileSync.run {
            switch algorithm {
            case .sha256: digest(path, SHA256())
            case .sha512: digest(path, SHA512())
            }
        }
    }

    private static func digest<H: HashFunction>(_ path: String, _ initial: H) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var hasher = initial
        while true {
            let block: Data?
            do {
                block = try handle.read(upToCount: 1 << 20)
            } catch {
                return nil
            }
            // nil or empty at the end of the file.
            guard let block, !block.isEmpty else { break }
            hasher.update(data: block)
        }
        return hasher.finalize().map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }

    /// nil when the file matches `checksum`, else why not (the download fails with it).
    static func mismatch(_ path: String, _ checksum: Checksum) async -> String? {
        guard let actual = await hex(of: path, checksum.algorithm) else { return "checksum not verified: cannot read \(path)" }
        guard actual != checksum.hex else { return nil }
        // Both digests in full: a person compares them with the published one, and a prefix can
        // hide which of two sums was given.
        return "\(checksum.algorithm.rawValue) mismatch: expected \(checksum.hex), got \(actual) (kept as .part)"
    }
}
