/// HTTP/1.1 as haul reads it off a socket of its own (plain http without a proxy, where the body
/// is moved from the socket to the file inside the kernel): the response head, how the body is
/// framed, and chunked bodies. Pure: bytes in, values out.
///
/// As strict as NIO's llhttp parser, which reads every other response, so a server gets the same
/// answer either way: a header name that is not a token, a control character in a value, a bare CR,
/// a folded line, conflicting lengths, and a length beside `Transfer-Encoding` are errors. A bare LF
/// ends a line, as curl takes it (llhttp is stricter there).
public enum HTTPWire {
    /// What makes a response unreadable, in the words the transfer gives it.
    public enum Failure: Error, Equatable, Sendable {
        /// Not an HTTP/1.x response at all (a status line that is not one, a bare CR).
        case notHTTP
        case invalidHeader
        case invalidContentLength
        /// No end of the head within `maxHeadBytes`.
        case headTooLarge
        /// Both `Transfer-Encoding` and `Content-Length`: which one frames the body is a guess, and a
        /// wrong guess is a wrong file (llhttp refuses it too).
        case lengthWithTransferEncoding
        case invalidChunk
    }

    /// How a response's body ends.
    public enum Framing: Equatable, Sendable {
        /// No body (1xx, 204, 304).
        case none
        /// Exactly this many bytes.
        case length(Int64)
        case chunked
        /// When the server closes the connection.
        case untilClose
    }

    public struct Head: Equatable, Sendable {
        public var major: Int
        public var minor: Int
        public var status: Int
        public var reason: String
        public var fields: [Field]
        public var framing: Framing
    }

    public struct Field: Equatable, Sendable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// NIO's default limit on a response head.
    public static let maxHeadBytes = 80 * 1024

    /// The final response head at the start of `bytes` (interim 1xx responses before it are
    /// skipped), and how many bytes it took with them; nil while it is incomplete.
    public static func parseHead(_ bytes: some Collection<UInt8>) throws(Failure) -> (head: Head, length: Int)? {
        let all = Array(bytes)
        var start = 0
        while true {
            // Empty lines before a status line are skipped, as llhttp skips them.
            while start < all.count, all[start] == 13 || all[start] == 10 { start += 1 }
            guard let (head, length) = try parseOne(all, from: start) else { return nil }
            start += length
            // 101 would switch protocols: haul never asks for that, so it is not skipped.
            if (100..<200).contains(head.status), head.status != 101 { continue }
            return (head, start)
        }
    }

    private static func parseOne(_ bytes: [UInt8], from start: Int) throws(Failure) -> (Head, Int)? {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = start
        var index = start
        // The status line must look like one from its first bytes: a server that speaks something
        // else is told apart at once, not after 80 KiB.
        let prefix = Array("HTTP/".utf8)
        let seen = min(bytes.count - start, prefix.count)
        if Array(bytes[start..<(start + seen)]) != Array(prefix[0..<seen]) { throw .notHTTP }
        while true {
            guard index < bytes.count else {
                if index - start > maxHeadBytes { throw .headTooLarge }
                return nil
            }
            let byte = bytes[index]
            if byte == 13 {
                // CR only before LF.
                guard index + 1 < bytes.count else {
                    if index - start > maxHeadBytes { throw .headTooLarge }
                    return nil
                }
                guard bytes[index + 1] == 10 else { throw .notHTTP }
                lines.append(bytes[lineStart..<index])
                index += 2
            } else if byte == 10 {
                lines.append(bytes[lineStart..<index])
                index += 1
            } else {
                index += 1
                if index - start > maxHeadBytes { throw .headTooLarge }
                continue
            }
            lineStart = index
            if index - start > maxHeadBytes { throw .headTooLarge }
            if let last = lines.last, last.isEmpty {
                return (try head(of: lines.dropLast()), index - start)
            }
        }
    }

    private static func head(of lines: ArraySlice<ArraySlice<UInt8>>) throws(Failure) -> Head {
        guard let statusLine = lines.first else { throw .notHTTP }
        var head = try status(statusLine)
        for line in lines.dropFirst() {
            head.fields.append(try field(line))
        }
        head.framing = try framing(status: head.status, fields: head.fields)
        return head
    }

    /// `HTTP/1.1 206 Partial Content`.
    private static func status(_ line: ArraySlice<UInt8>) throws(Failure) -> Head {
        let bytes = Array(line)
        // "HTTP/" D "." D SP DDD [SP reason]
        guard bytes.count >= 12, bytes[0..<5].elementsEqual("HTTP/".utf8),
              let major = digit(bytes[5]), bytes[6] == UInt8(ascii: "."), let minor = digit(bytes[7]),
              bytes[8] == UInt8(ascii: " ")
        else { throw .notHTTP }
        guard major == 1 else { throw .notHTTP }
        var status = 0
        for byte in bytes[9..<12] {
            guard let value = digit(byte) else { throw .notHTTP }
            status = status * 10 + value
        }
        guard status >= 100 else { throw .notHTTP }
        var reason = ""
        if bytes.count > 12 {
            guard bytes[12] == UInt8(ascii: " ") else { throw .notHTTP }
            let text = bytes[13...]
            guard text.allSatisfy({ $0 == 9 || $0 >= 32 && $0 != 127 }) else { throw .notHTTP }
            reason = String(decoding: text, as: UTF8.self)
        }
        return Head(major: major, minor: minor, status: status, reason: reason, fields: [], framing: .untilClose)
    }

    /// `Name: value`, the value without the spaces around it.
    private static func field(_ line: ArraySlice<UInt8>) throws(Failure) -> Field {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .invalidHeader }
        let name = line[line.startIndex..<colon]
        // A folded line (leading space) and a space before the colon are refused, as llhttp does.
        guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .invalidHeader }
        var value = line[(colon + 1)...]
        guard value.allSatisfy({ $0 == 9 || $0 >= 32 && $0 != 127 }) else { throw .invalidHeader }
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
        return Field(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
    }

    /// RFC 9112 §6.3, for a response to a GET.
    private static func framing(status: Int, fields: [Field]) throws(Failure) -> Framing {
        if (100..<200).contains(status) || status == 204 || status == 304 { return .none }
        let codings = fields.filter { $0.name.lowercased() == "transfer-encoding" }
            .flatMap { $0.value.split(separator: ",") }
            .map { $0.trimmingSpaces.lowercased() }
            .filter { !$0.isEmpty }
        let lengthFields = fields.filter { $0.name.lowercased() == "content-length" }
        if !codings.isEmpty {
            guard lengthFields.isEmpty else { throw .lengthWithTransferEncoding }
            // A body not chunked last ends with the connection.
            return codings.last == "chunked" ? .chunked : .untilClose
        }
        let lengths = lengthFields
            .flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingSpaces }
        guard let first = lengths.first else { return .untilClose }
        guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.utf8.count <= 18,
              first.utf8.allSatisfy({ digit($0) != nil }), let length = Int64(first)
        else { throw .invalidContentLength }
        return .length(length)
    }

    private static func digit(_ byte: UInt8) -> Int? {
        (48...57).contains(byte) ? Int(byte - 48) : nil
    }

    /// RFC 9110 tchar.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// A chunked body, decoded as it arrives: which bytes of each read are data.
    public struct ChunkedDecoder: Equatable, Sendable {
        enum State: Equatable {
            /// Reading a chunk's size (hex digits so far), then its extensions until the line ends.
            case size(value: Int64, digits: Int, inExtension: Bool, sawCR: Bool)
            case data(left: Int64)
            /// After a chunk's data: its CRLF.
            case dataEnd(sawCR: Bool)
            /// After the last chunk: trailer lines until an empty one (`lineLength` so far).
            case trailer(lineLength: Int, sawCR: Bool)
            case done
        }

        private(set) var state = State.size(value: 0, digits: 0, inExtension: false, sawCR: false)

        public init() {}

        /// Whether the last chunk and the trailer have been read: the body is complete.
        public var isDone: Bool { state == .done }

        /// The ranges of `bytes` that are body data, in order; bytes after the end are ignored.
        public mutating func decode(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> [Range<Int>] {
            var ranges: [Range<Int>] = []
            var index = 0
            while index < bytes.count {
                switch state {
                case .done:
                    return ranges
                case .data(let left):
                    let take = Int(min(left, Int64(bytes.count - index)))
                    ranges.append(index..<(index + take))
                    index += take
                    state = left - Int64(take) == 0 ? .dataEnd(sawCR: false) : .data(left: left - Int64(take))
                case .dataEnd(let sawCR):
                    let byte = bytes[index]
                    index += 1
                    if byte == 10 {
                        state = .size(value: 0, digits: 0, inExtension: false, sawCR: false)
                    } else if byte == 13, !sawCR {
                        state = .dataEnd(sawCR: true)
                    } else {
                        throw .invalidChunk
                    }
                case .size(let value, let digits, let inExtension, let sawCR):
                    let byte = bytes[index]
                    index += 1
                    if sawCR, byte != 10 { throw .invalidChunk }
                    if byte == 10 {
                        guard digits > 0 else { throw .invalidChunk }
                        state = value == 0 ? .trailer(lineLength: 0, sawCR: false) : .data(left: value)
                    } else if byte == 13 {
                        state = .size(value: value, digits: digits, inExtension: inExtension, sawCR: true)
                    } else if inExtension {
                        guard byte == 9 || byte >= 32 && byte != 127 else { throw .invalidChunk }
                    } else if let hex = Self.hex(byte) {
                        // 15 significant hex digits: up to 2^60, far above any file. Leading zeros
                        // do not count (a tester's `0000000000000400`, which RFC 9112 allows and
                        // llhttp takes, was refused over plain http alone), up to a line of 64.
                        guard value < 1 << 56, digits < 64 else { throw .invalidChunk }
                        state = .size(value: value * 16 + Int64(hex), digits: digits + 1, inExtension: false, sawCR: false)
                    } else if byte == UInt8(ascii: ";") || byte == 32 || byte == 9 {
                        guard digits > 0 else { throw .invalidChunk }
                        state = .size(value: value, digits: digits, inExtension: true, sawCR: false)
                    } else {
                        throw .invalidChunk
                    }
                case .trailer(let lineLength, let sawCR):
                    let byte = bytes[index]
                    index += 1
                    if sawCR, byte != 10 { throw .invalidChunk }
                    if byte == 10 {
                        state = lineLength == 0 ? .done : .trailer(lineLength: 0, sawCR: false)
                    } else if byte == 13 {
                        state = .trailer(lineLength: lineLength, sawCR: true)
                    } else {
                        guard lineLength < HTTPWire.maxHeadBytes else { throw .invalidChunk }
                        state = .trailer(lineLength: lineLength + 1, sawCR: false)
                    }
                }
            }
            return ranges
        }

        private static func hex(_ byte: UInt8) -> Int? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A")) + 10
            default: nil
            }
        }
    }
}

private extension Substring {
    var trimmingSpaces: String {
        var text = self[...]
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
