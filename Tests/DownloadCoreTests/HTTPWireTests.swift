import DownloadCore
import Testing

@Suite struct HTTPWireHeadTests {
    private func parse(_ text: String) throws(HTTPWire.Failure) -> (head: HTTPWire.Head, length: Int)? {
        try HTTPWire.parseHead(Array(text.utf8))
    }

    @Test func aCompleteHeadAndWhereItsBodyStarts() throws {
        let text = "HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\nETag:  \"v1\" \r\n\r\nhello"
        let (head, length) = try #require(try parse(text))
        #expect(head.major == 1 && head.minor == 1)
        #expect(head.status == 206 && head.reason == "Partial Content")
        #expect(head.fields == [.init(name: "Content-Length", value: "5"), .init(name: "ETag", value: "\"v1\"")])
        #expect(head.framing == .length(5))
        #expect(length == text.utf8.count - 5)
    }

    @Test func anIncompleteHeadWaitsForMoreBytes() throws {
        let text = "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        for cut in [0, 3, 8, 20, 36, 37] {
            #expect(try HTTPWire.parseHead(Array(text.utf8.prefix(cut))) == nil, "cut at \(cut)")
        }
        #expect(try parse(text)?.length == 38)
    }

    @Test func interimResponsesAreSkipped() throws {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        let (head, length) = try #require(try parse(text))
        #expect(head.status == 200 && head.framing == .length(0))
        #expect(length == text.utf8.count)
        // Only the interim response so far: still waiting.
        #expect(try parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2") == nil)
    }

    @Test func emptyLinesBeforeTheStatusLineAreSkipped() throws {
        let text = "\r\n\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        let (head, length) = try #require(try parse(text))
        #expect(head.status == 200 && length == text.utf8.count)
        #expect(try parse("\r\n") == nil, "nothing but empty lines yet")
    }

    @Test func bareLineFeedsEndLinesAndAReasonMayBeEmpty() throws {
        let head = try #require(try parse("HTTP/1.1 200\nContent-Length: 1\n\nx")).head
        #expect(head.status == 200 && head.reason == "" && head.framing == .length(1))
        #expect(try parse("HTTP/1.1 404 \r\n\r\n")?.head.reason == "")
    }

    @Test("how the body is framed", arguments: [
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTPWire.Framing.chunked),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", .chunked),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .untilClose),
        ("HTTP/1.1 200 OK\r\n\r\n", .untilClose),
        ("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n", .length(7)),
        ("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", .none),
        ("HTTP/1.1 304 Not Modified\r\n\r\n", .none),
    ])
    func framing(text: String, framing: HTTPWire.Framing) throws {
        #expect(try parse(text)?.head.framing == framing)
    }

    @Test("what NIO's parser refuses is refused", arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Bad\u{01}Name: v\r\n\r\n", HTTPWire.Failure.invalidHeader),
        ("HTTP/1.1 200 OK\r\nX-Value: a\u{01}b\r\n\r\n", .invalidHeader),
        ("HTTP/1.1 200 OK\r\nName : v\r\n\r\n", .invalidHeader),
        ("HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n", .invalidHeader),
        ("HTTP/1.1 200 OK\r\nNo colon\r\n\r\n", .invalidHeader),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1000\r\n\r\n", .lengthWithTransferEncoding),
        ("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: gzip\r\n\r\n", .lengthWithTransferEncoding),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\rX-Next: 1\r\n\r\n", .notHTTP),
        ("SSH-2.0-OpenSSH_9.6\r\n", .notHTTP),
        ("HTTP/2.0 200 OK\r\n\r\n", .notHTTP),
        ("HTTP/1.1 20 OK\r\n\r\n", .notHTTP),
        ("HTTP/1.1 099 Low\r\n\r\n", .notHTTP),
        ("HTTP/1.1 200OK\r\n\r\n", .notHTTP),
    ])
    func refused(text: String, failure: HTTPWire.Failure) {
        #expect(throws: failure) { try HTTPWire.parseHead(Array(text.utf8)) }
    }

    @Test func somethingElseIsToldApartFromItsFirstBytes() {
        // Not HTTP from the first byte: no waiting for a head that will never end.
        #expect(throws: HTTPWire.Failure.notHTTP) { try HTTPWire.parseHead(Array("SSH".utf8)) }
        #expect(throws: HTTPWire.Failure.notHTTP) { try HTTPWire.parseHead([0x15, 0x03, 0x03]) }
    }

    @Test func aHeadThatNeverEndsIsTooLarge() throws {
        var bytes = Array("HTTP/1.1 200 OK\r\n".utf8)
        bytes += Array(repeating: UInt8(ascii: "a"), count: HTTPWire.maxHeadBytes - 100)
        #expect(try HTTPWire.parseHead(bytes) == nil, "under the limit: waits")
        bytes += Array(repeating: UInt8(ascii: "a"), count: 200)
        #expect(throws: HTTPWire.Failure.headTooLarge) { try HTTPWire.parseHead(bytes) }
        var lines = Array("HTTP/1.1 200 OK\r\n".utf8)
        while lines.count <= HTTPWire.maxHeadBytes { lines += Array("X-A: b\r\n".utf8) }
        #expect(throws: HTTPWire.Failure.headTooLarge) { try HTTPWire.parseHead(lines + Array("\r\n".utf8)) }
    }
}

@Suite struct ChunkedDecoderTests {
    /// The data `text` decodes to when it arrives in pieces of `step` bytes, and whether it ended.
    private func decode(_ text: String, step: Int) throws -> (String, Bool) {
        var decoder = HTTPWire.ChunkedDecoder()
        let bytes = Array(text.utf8)
        var data: [UInt8] = []
        var start = 0
        while start < bytes.count {
            let piece = Array(bytes[start..<min(bytes.count, start + step)])
            let ranges = try piece.withUnsafeBytes { raw in try decoder.decode(raw) }
            for range in ranges { data += piece[range] }
            start += step
        }
        return (String(decoding: data, as: UTF8.self), decoder.isDone)
    }

    @Test func chunksInAnyPiecesDecodeTheSame() throws {
        let text = "5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nafter the end"
        for step in [1, 2, 3, 7, 100] {
            let (data, done) = try decode(text, step: step)
            #expect(data == "hello 0123456789", "step \(step)")
            #expect(done, "step \(step)")
        }
    }

    @Test func aBodyCutShortIsNotDone() throws {
        let (data, done) = try decode("5\r\nhel", step: 4)
        #expect(data == "hel" && !done)
        #expect(try decode("5\r\nhello\r\n0\r\n", step: 3).1 == false, "the trailer's empty line is still to come")
        #expect(try decode("5\nhello\n0\n\n", step: 3) == ("hello", true), "bare line feeds")
    }

    /// Leading zeros do not count against a size's digits (a tester's 16-digit `0000000000000005`,
    /// which llhttp takes, was refused over plain http alone); a size past 2^60 still is.
    @Test func leadingZerosInAChunkSizeAreTaken() throws {
        #expect(try decode("0000000000000005\r\nhello\r\n0\r\n\r\n", step: 3) == ("hello", true))
        #expect(try decode(String(repeating: "0", count: 40) + "5\r\nhello\r\n0\r\n\r\n", step: 7) == ("hello", true))
    }

    @Test("broken chunk framing is refused", arguments: [
        "x\r\n", "\r\n", "5\r\nhelloX\r\n", "5\rX", "12345678901234567\r\n", "1000000000000000\r\n", ";ext\r\n", "5\r\nhello\r\n0\r\nA: b\rX",
        String(repeating: "0", count: 70) + "5\r\n",
    ])
    func refused(text: String) {
        #expect(throws: HTTPWire.Failure.invalidChunk) { try decode(text, step: 1) }
        #expect(throws: HTTPWire.Failure.invalidChunk) { try decode(text, step: 64) }
    }
}
