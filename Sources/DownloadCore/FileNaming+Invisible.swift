extension FileNaming {
    /// Zero-width characters and the bidirectional marks; the embeddings, overrides and isolates
    /// are controls already (`TerminalText.isControl`), removed with them.
    static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x200B...0x200D, 0x2060, 0xFEFF: true
        case 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }
}
