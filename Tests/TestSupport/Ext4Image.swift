import Foundation

/// A small ext4 file system in an image file, loop-mounted (root only): for power cuts (the
/// shutdown ioctl) and file systems mounted again within one boot.
public final class Ext4Image: Sendable {
    public let image: String
    /// Where it is mounted.
    public let mountPoint: String
    /// Kept until the image is unmounted (`deinit`), then removed with it.
    private let directory: TemporaryDirectory

    /// Makes and mounts an image of `megabytes` in `directory` (kept while the image is); nil (said on stdout, with `what`
    /// the test) where it cannot be made or mounted here.
    public static func make(in directory: TemporaryDirectory, megabytes: Int = 32, for what: String) async throws -> Ext4Image? {
        let image = directory.path("fs.img")
        let disk = directory.path("mnt")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: image, contents: nil) else { return nil }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: image))
        try handle.truncate(atOffset: UInt64(megabytes) << 20)
        try handle.close()
        let made = try await ChildProcess.run("/sbin/mkfs.ext4", ["-q", "-F", image])
        let mounted = made.status == 0 ? try await ChildProcess.run("/bin/mount", ["-o", "loop", image, disk]) : made
        guard mounted.status == 0 else {
            print("\(what): cannot make and mount an ext4 image here (exit \(mounted.status)); not run")
            return nil
        }
        return Ext4Image(image: image, mountPoint: disk, directory: directory)
    }

    private init(image: String, mountPoint: String, directory: TemporaryDirectory) {
        self.image = image
        self.mountPoint = mountPoint
        self.directory = directory
    }

    /// Mounts the image again (after `unmount`, or a shutdown): a new mount of the same file system.
    public func mountAgain() async throws -> Bool {
        try await ChildProcess.run("/bin/mount", ["-o", "loop", image, mountPoint]).status == 0
    }

    /// Cuts the power to it: nothing more reaches its disk (ext4's shutdown ioctl, as xfstests' `godown`).
    public func cutPower() async throws -> Bool {
        try await ChildProcess.run("/usr/bin/python3", [
            "-c", "import os, fcntl, struct; fd = os.open('\(mountPoint)', os.O_RDONLY); fcntl.ioctl(fd, 0x8004587D, struct.pack('I', 2))",
        ]).status == 0
    }

    deinit {
        _ = unmount(mountPoint)
    }
}
