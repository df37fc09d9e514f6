import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One change at a time to a directory's entries (a file created, linked, renamed or unlinked),
/// per directory, across the process.
///
/// Sixteen transfers creating their part files in one directory at once contend for the kernel's
/// lock on that directory, and Linux spins while it waits for a writer that holds it: on ext4, a
/// thousand 100 KiB files made by 16 threads took 0.54 s of system time against 0.28 s for one
/// thread, and 0.29 s for 16 threads behind a lock of their own, which sleep instead of spinning.
/// A directory maps to one of a few locks by its path, so that downloads into other directories
/// rarely wait for each other; each call holds one for a single system call, never for a copy.
enum DirectoryLock {
    private final class Stripe: Sendable {
        let mutex = Mutex(())
    }

    private static let stripes: [Stripe] = (0..<16).map { _ in Stripe() }

    /// Runs `call`, one system call that changes the entries of the directory holding `path`, with
    /// that directory's lock held; `errno` after it is the call's own.
    static func change<Result>(_ path: String, _ call: () -> Result) -> Result {
        let stripe = stripes[stripeIndex(path)]
        var code: Int32 = 0
        let result = stripe.mutex.withLock { _ in
            let result = call()
            code = errno
            return result
        }
        errno = code
        return result
    }

    /// The stripe of the directory holding `path`: its bytes before the last slash (none: the
    /// working directory's, like a path without one).
    static func stripeIndex(_ path: String) -> Int {
        // FNV-1a over the directory's bytes: no per-process seed, no allocation.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let bytes = path.utf8
        let end = bytes.lastIndex(of: UInt8(ascii: "/")) ?? bytes.startIndex
        for byte in bytes[..<end] {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int(hash % UInt64(stripes.count))
    }
}
