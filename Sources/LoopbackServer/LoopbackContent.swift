import Crypto

/// The bytes of a loopback resource: a pure function of (seed, version, position).
///
/// Every 8-byte word is a SplitMix64 hash of its index, so no short pattern repeats and any byte
/// that lands at the wrong offset, or comes from another version, changes the file's digest.
public enum LoopbackContent {
    /// The bytes at `range` of the resource `seed` in `version`.
    public static func bytes(seed: UInt64, version: Int, range: Range<Int>) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: range.count)
        result.withUnsafeMutableBytes { fill($0, seed: seed, version: version, from: range.lowerBound) }
        return result
    }

    /// Fills `buffer` with the bytes that start at `offset`.
    ///
    /// Whole words are stored at once: tests serve megabytes from debug builds, where a loop per
    /// byte would keep a thread of the cooperative pool busy for seconds.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer, seed: UInt64, version: Int, from offset: Int) {
        let key = seed &* 0x9E37_79B9_7F4A_7C15 ^ (UInt64(truncatingIfNeeded: version) << 32)
        var position = offset
        var index = 0
        let count = buffer.count
        while index < count {
            let skip = position % 8
            if skip == 0, count - index >= 8 {
                buffer.storeBytes(of: splitmix(key &+ UInt64(position / 8)).littleEndian, toByteOffset: index, as: UInt64.self)
                index += 8
                position += 8
                continue
            }
            let word = splitmix(key &+ UInt64(position / 8)) >> UInt64(skip * 8)
            let take = min(8 - skip, count - index)
            for byte in 0..<take {
                buffer[index + byte] = UInt8(truncatingIfNeeded: word >> UInt64(byte * 8))
            }
            index += take
            position += take
        }
    }

    /// The SHA-256 of the whole resource, in lower-case hex.
    public static func sha256(seed: UInt64, version: Int, size: Int) -> String {
        var hasher = SHA256()
        var offset = 0
        let block = 1 << 20
        while offset < size {
            let count = min(block, size - offset)
            hasher.update(data: bytes(seed: seed, version: version, range: offset..<(offset + count)))
            offset += count
        }
        return hex(hasher.finalize())
    }

    public static func hex(_ digest: some Sequence<UInt8>) -> String {
        digest.map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }

    private static func splitmix(_ input: UInt64) -> UInt64 {
        var z = input &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
