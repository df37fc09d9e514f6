@testable import DownloadEngine
import DownloadCore
import Testing

/// Text work done for every download (and, for directories, for every row at every space check),
/// kept cheap: each fast path gives what the full way gives.
struct HotPathTextTests {
    @Test(arguments: [
        ("/downloads/a.bin.part", "/downloads"),
        ("/a.part", "/"),
        ("a.part", "."),
        ("sub/dir/x.part", "sub/dir"),
        ("/données/名前 1/ファイル.part", "/données/名前 1"),
        ("/trailing/", "/trailing"),
        ("", "."),
    ])
    func theDirectoryOfAPathIsWhatIsBeforeItsLastSlash(path: String, directory: String) {
        #expect(DiskWatch.directory(of: path) == directory)
        // As the characters' search found it.
        let slash = path.lastIndex(of: "/")
        #expect(slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "." == directory)
    }

    @Test(arguments: [
        ("\"abc123\"", "\"abc123\""),
        ("  W/\"x-y\"  ", "W/\"x-y\""),
        ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ("\"a\u{1B}[31mb\"", "\"a[31mb\""),
        (" \"bad\r\nX-Injected: 1\" ", "\"badX-Injected: 1\""),
        ("\u{202E}\"rtl\"", "\"rtl\""),
        ("", ""),
    ])
    func aValidatorLosesItsControlCharactersAndSurroundingSpace(value: String, stored: String) {
        #expect(Transfer.trimmed(value) == stored)
        #expect(String(value.unicodeScalars.filter { !TerminalText.isControl($0) }.map(Character.init)).trimmingWhitespace() == stored)
    }
}
