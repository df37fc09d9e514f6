import DownloadCore
import Foundation
import Testing

/// Part-file names that fit NAME_MAX whatever the destination's length (issue 16, item 8).
@Suite struct PartNameTests {
    @Test(arguments: [5, 100, 250, 251, 254, 255])
    func aPartFileNameFitsNameMax(bytes: Int) {
        let name = String(repeating: "n", count: bytes - 4) + ".iso"
        let part = FileNaming.partName(for: name)
        #expect(part.utf8.count <= 255)
        #expect(part.hasSuffix(".part"))
        if bytes <= 250 {
            #expect(part == name + ".part")
        } else {
            #expect(part.hasPrefix(String(repeating: "n", count: 200)))
            #expect(part.utf8.count == 255)
        }
    }

    @Test func thePartFileNameSaysWhichCandidateItIsFor() {
        #expect(FileNaming.attempt(ofPartName: "f.bin.part", for: "f.bin") == 0)
        #expect(FileNaming.attempt(ofPartName: "f.bin.1.part", for: "f.bin") == 1)
        #expect(FileNaming.attempt(ofPartName: "f.bin.12.part", for: "f.bin") == 12)
        #expect(FileNaming.attempt(ofPartName: "名前.bin.3.part", for: "名前.bin") == 3)
        for other in ["f.bin.01.part", "f.bin.x.part", "f.bin..part", "f.bin.1", "f.bin.1.partial", "g.bin.1.part", "f.bin.-1.part", "f.bin.1234567.part", ".part"] {
            #expect(FileNaming.attempt(ofPartName: other, for: "f.bin") == nil, "\(other)")
        }
        // A name too long for `.part`: its shortened part file is known as the name's.
        let long = String(repeating: "n", count: 246) + ".iso"
        #expect(FileNaming.attempt(ofPartName: FileNaming.partName(for: long), for: long) == 0)
    }

    @Test func aSecondDownloadOfOneNameIsNamedForItsPartFile() {
        let url = URL(string: "http://example.com/files/f.bin?2")!
        var download = Download(id: DownloadID(rawValue: 2), url: url, destination: .directory("/d"), partPath: "/d/f.bin.1.part")
        #expect(download.firstAttempt == 1)
        #expect(download.intendedName == "f.bin.1")
        download.destination = .directory("/d/")
        #expect(download.intendedName == "f.bin.1", "a directory given with its slash")
        // A part file elsewhere, an exact destination, or the server's own name: the name itself.
        download.partPath = "/e/f.bin.1.part"
        #expect(download.intendedName == "f.bin")
        download.partPath = "/d/f.bin.1.part"
        download.serverFileName = "report.pdf"
        #expect(download.intendedName == "report.pdf")
        let exact = Download(id: DownloadID(rawValue: 3), url: url, destination: .file("/d/f.bin.1"), partPath: "/d/f.bin.1.part")
        #expect(exact.firstAttempt == 0)
    }

    @Test func longPartFileNamesAreCutOnACharacterBoundaryAndStayDistinct() {
        let a = String(repeating: "é", count: 126) + ".a"
        let b = String(repeating: "é", count: 126) + ".b"
        let partA = FileNaming.partName(for: a)
        let partB = FileNaming.partName(for: b)
        #expect(partA != partB, "two names that share their first bytes share no part file")
        #expect(partA.utf8.count <= 255 && partB.utf8.count <= 255)
        #expect(String(decoding: Array(partA.utf8), as: UTF8.self) == partA, "valid UTF-8")
        #expect(FileNaming.partName(for: a) == partA, "the same name gives the same part file")
        #expect(FileNaming.partName(for: a, suffix: ".haul-tmp").hasSuffix(".haul-tmp"))
    }

    @Test func theMachineGivesALongDestinationAPartFileThatFits() throws {
        var m = SessionStateMachine(configuration: .init(maxActive: 1))
        let name = String(repeating: "x", count: 255)
        let (id, _) = try m.schedule(url: URL(string: "http://h/f")!, destination: .file("/d/" + name))
        let part = try #require(m.download(id)?.partPath)
        #expect(part.hasPrefix("/d/"))
        #expect((part as NSString).lastPathComponent.utf8.count <= 255)
        #expect(part == SessionStateMachine.partPath(ofFile: "/d/" + name))
        // The same destination is still one claim: a second download of it is refused.
        #expect(throws: SessionStateMachine.TransitionError.self) {
            _ = try m.schedule(url: URL(string: "http://h/g")!, destination: .file("/d/" + name))
        }
    }
}
