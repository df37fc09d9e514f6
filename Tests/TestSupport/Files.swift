import Crypto
import Foundation

/// SHA-256 of the file at `path` in lower-case hex, or "" when it cannot be read.
public func sha256(ofFile path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    return SHA256.hash(data: data).map { byte in byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }.joined()
}

/// The length of the file at `path`, nil when there is none.
public func fileLength(_ path: String) -> Int64? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return Int64(info.st_size)
}

/// Detaches the file system mounted at `path` (as `umount -l`), a tmpfs a test mounted to run out
/// of room; false when nothing could be detached there.
@discardableResult
public func unmount(_ path: String) -> Bool {
    detachMount(path, 2) == 0
}

/// `umount2(2)`, which Swift's Glibc module does not declare; 2 is `MNT_DETACH`.
@_silgen_name("umount2")
private func detachMount(_ target: UnsafePointer<CChar>, _ flags: Int32) -> Int32

/// How fast the files of `directory` whose names end in `suffix` grow together, in bytes a second:
/// the least-squares slope of their summed lengths, sampled every 50 ms over `duration`.
///
/// What a client's speed is measured by on its own side (the bytes its part files hold), where a
/// server's count of what it wrote also counts what the kernel buffers between the two.
public func growthRate(ofFilesIn directory: String, endingIn suffix: String, over duration: Duration) async throws -> Double {
    let started = ContinuousClock.now
    var samples: [(time: Double, bytes: Double)] = []
    while true {
        let elapsed = started.duration(to: .now)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let bytes = names.filter { $0.hasSuffix(suffix) }.reduce(Int64(0)) { $0 + (fileLength(directory + "/" + $1) ?? 0) }
        samples.append((Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, Double(bytes)))
        guard elapsed < duration else { break }
        try await Task.sleep(for: .milliseconds(50))
    }
    let count = Double(samples.count)
    let meanTime = samples.reduce(0) { $0 + $1.time } / count
    let meanBytes = samples.reduce(0) { $0 + $1.bytes } / count
    let covariance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.bytes - meanBytes) }
    let variance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.time - meanTime) }
    return variance > 0 ? covariance / variance : 0
}
