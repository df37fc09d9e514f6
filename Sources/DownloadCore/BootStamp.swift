/// What a checkpoint stores of the boot it was taken in: the boot's id, then the unique id of each
/// mount its queue's part files were on (`BOOT;DEVICE=MOUNT;…`).
///
/// Bytes written but not synced live in the page cache of that mount, and die with it: after a
/// reboot, and also when the file system went away within the boot and was mounted again (a
/// shutdown of ext4, a pulled disk). A tester's ext4 `data=writeback` cut this way kept the part
/// file's length but not its last bytes: 246 zeros were resumed after and completed, exit 0.
public enum BootStamp {
    /// How `current` marks this boot when the part file's file system was mounted again since.
    public static let remounted = ";remounted"

    /// `boot`, with the mounts of each device in order (a file system bind-mounted twice has two).
    public static func string(boot: String, mounts: [UInt64: Set<UInt64>]) -> String {
        var text = boot
        for device in mounts.keys.sorted() {
            for mount in (mounts[device] ?? []).sorted() { text += ";\(device)=\(mount)" }
        }
        return text
    }

    /// The boot id and the mounts of a stored stamp (one without mounts: a boot id alone).
    public static func parse(_ text: String) -> (boot: String, mounts: [UInt64: Set<UInt64>]) {
        let fields = text.split(separator: ";", omittingEmptySubsequences: false)
        var mounts: [UInt64: Set<UInt64>] = [:]
        for field in fields.dropFirst() {
            let pair = field.split(separator: "=")
            if pair.count == 2, let device = UInt64(pair[0]), let mount = UInt64(pair[1]) { mounts[device, default: []].insert(mount) }
        }
        return (String(fields.first ?? ""), mounts)
    }

    /// What a recovery compares the stamp `checkpoint` with (`QueueRecovery.plan`'s `currentBoot`):
    /// the stamp itself when it is of this boot (`boot`) and the part file's file system (`mount`,
    /// its device and mount now; nil when unknown) is the mount it names, or none is named; this
    /// boot marked `remounted` when that file system was mounted again since; else `boot`.
    public static func current(checkpoint: String?, boot: String?, mount: (device: UInt64, id: UInt64)?) -> String? {
        guard let boot else { return nil }
        guard let checkpoint else { return boot }
        let stored = parse(checkpoint)
        guard stored.boot == boot else { return boot }
        if let mount, let then = stored.mounts[mount.device], !then.contains(mount.id) { return boot + remounted }
        return checkpoint
    }
}
