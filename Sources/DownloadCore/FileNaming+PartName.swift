extension FileNaming {
    /// The part file's name for a file named `name`: `name.part`, or, when that would pass
    /// NAME_MAX (255 bytes), `name` cut on a character boundary, `~` and eight hex digits of a
    /// hash of the whole name, then `.part`.
    ///
    /// A destination may itself use all 255 bytes (`-o` with the longest legal name); its part file
    /// must still be creatable. The hash keeps two long names that share their first 240 bytes
    /// from sharing a part file. The name is stored with the download, so a resume finds it.
    ///
    /// `suffix` replaces `.part` for other files kept beside the destination (`.haul-tmp`).
    public static func partName(for name: String, suffix: String = ".part") -> String {
        guard name.utf8.count + suffix.utf8.count > maxFileNameBytes else { return name + suffix }
        let tag = "~" + hex(fnv1a(Array(name.utf8)) & 0xFFFF_FFFF, digits: 8)
        var stem = ""
        for character in name {
            if stem.utf8.count + character.utf8.count + tag.utf8.count + suffix.utf8.count > maxFileNameBytes { break }
            stem.append(character)
        }
        return stem + tag + suffix
    }

    /// NAME_MAX on Linux file systems: the most bytes one path component may have.
    public static let maxFileNameBytes = 255

    /// FNV-1a, 64 bits: stable across runs and builds (Swift's `Hasher` is seeded per process).
    private static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
