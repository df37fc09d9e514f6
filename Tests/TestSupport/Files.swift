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

/// The summed lengths of the files of `directory` whose names end in `suffix`.
public func totalLength(ofFilesIn directory: String, endingIn suffix: String) -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.filter { $0.hasSuffix(suffix) }.reduce(0) { $0 + Int(fileLength(directory + "/" + $1) ?? 0) }
}
