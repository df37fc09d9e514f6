#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `posix_spawn` needs from Swift, for every program haul starts (a runner, a hook).
public enum Spawn {
    /// glibc's `POSIX_SPAWN_SETSID` (2.26+), which Swift's Glibc module does not declare: the child
    /// starts a session of its own, without a controlling terminal.
    public static let setSessionFlag: Int32 = 0x80

    /// `strings` as a NULL-terminated array of C strings, for `argv` and `envp`.
    public static func withCStrings<T>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> T) -> T {
        var pointers = strings.map { strdup($0) }
        defer { for pointer in pointers { free(pointer) } }
        pointers.append(nil)
        return body(pointers)
    }

    /// Closes every descriptor from `first` on in the child: nothing of haul's (the queue's
    /// database, a pipe a script reads, sockets) reaches the program.
    @discardableResult
    public static func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ first: Int32) -> Int32 {
        spawnCloseFrom(actions, first)
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does
/// not declare.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
