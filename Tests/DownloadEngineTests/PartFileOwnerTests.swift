import DownloadCore
@testable import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A part file is marked with the queue that writes it (`PartFileOwner`), and no other queue
/// writes, replaces, cuts or removes one with bytes that carries another's mark. (The machine's
/// side, a name of its own, is in `PartOwnerMachineTests`; two real queues in `TwoQueuesTests`.)
@Suite struct PartFileOwnerTests {
    /// `f.bin.part` in a new directory, written by queue `queue` with `count` bytes and closed, as
    /// a pause leaves it.
    func paused(by queue: String, _ count: Int) throws -> (path: String, directory: TemporaryDirectory) {
        let directory = try TemporaryDirectory("partowner")
        let path = directory.path("f.bin.part")
        let writer = try PartFile(path: path, owner: queue)
        let bytes = [UInt8](repeating: 7, count: count)
        #expect(bytes.withUnsafeBytes { pwrite(writer.descriptor, $0.baseAddress, $0.count, 0) } == bytes.count)
        writer.close()
        return (path, directory)
    }

    @Test func aQueueMarksThePartFilesItWrites() throws {
        let (path, directory) = try paused(by: "queue-a", 10)
        #expect(PartFileOwner.mark(path: path) == "queue-a")
        #expect(PartFileOwner.other(than: "queue-a", path: path) == nil)
        #expect(PartFileOwner.other(than: "queue-b", path: path) == "queue-a")
        #expect(PartFileOwner.other(than: nil, path: path) == nil, "a session without an id looks at no mark")
        // Its own file opens again, bytes and all.
        let again = try PartFile(path: path, owner: "queue-a")
        #expect(again.length == 10)
        again.close()
        _ = directory
    }

    @Test func anotherQueuesPartFileWithBytesIsNotOpenedForWriting() throws {
        let (path, directory) = try paused(by: "queue-a", 10)
        do {
            _ = try PartFile(path: path, owner: "queue-b")
            Issue.record("queue-b opened queue-a's part file")
        } catch {
            #expect(error.isForeign)
            #expect(error.description == "\(path) is another download's part file (left alone)")
        }
        #expect(PartFileOwner.mark(path: path) == "queue-a")
        #expect(FileSync.length(path) == 10)
        _ = directory
    }

    @Test func anEmptyPartFileOfAnotherQueueIsTakenAndMarkedAnew() throws {
        let (path, directory) = try paused(by: "queue-a", 0)
        let taken = try PartFile(path: path, owner: "queue-b")
        #expect(PartFileOwner.mark(path: path) == "queue-b", "nothing of queue-a's is in it")
        taken.close()
        _ = directory
    }

    @Test func anUnmarkedPartFileIsTakenAsBefore() throws {
        let directory = try TemporaryDirectory("partowner")
        let path = directory.path("f.bin.part")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 1, count: 10)))
        let writer = try PartFile(path: path, owner: "queue-b")
        #expect(writer.length == 10)
        #expect(PartFileOwner.mark(path: path) == "queue-b")
        writer.close()
    }

    /// An attempt of a download whose row has no bytes of its own does not open an unmarked file
    /// with bytes for writing (one may appear after the attempt first looked); one whose row has
    /// bytes does, and marks it.
    @Test func anUnmarkedFileIsOpenedOnlyByADownloadWithBytesOfItsOwn() throws {
        let directory = try TemporaryDirectory("partowner")
        let path = directory.path("f.bin.part")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 1, count: 10)))
        do {
            _ = try PartFile(path: path, owner: "queue-b/2", adoptsUnmarked: false)
            Issue.record("a download without bytes of its own opened an unmarked file")
        } catch {
            #expect(error.isUnmarked)
            #expect(error.description == "\(path) holds bytes this download did not write (left alone)")
        }
        #expect(PartFileOwner.mark(path: path) == nil)
        let writer = try PartFile(path: path, owner: "queue-b/2", adoptsUnmarked: true)
        #expect(writer.length == 10)
        #expect(PartFileOwner.mark(path: path) == "queue-b/2")
        writer.close()
    }

    /// A restart writes the new version's first bytes beside the part file first: a file of that
    /// name that is not this download's leftover is left alone (a tester's `f.bin.part.new`, a
    /// person's, was deleted); its own leftover (a crash before the rename) is made anew.
    @Test func aRestartLeavesAFileBesideThePartFileThatIsNotItsOwn() throws {
        let (path, directory) = try paused(by: "queue-a", 4096)
        let persons = directory.path("f.bin.part.new")
        #expect(FileManager.default.createFile(atPath: persons, contents: Data("notes\n".utf8)))
        let leftover = directory.path("f.bin.part.new1")
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data("half".utf8)))
        let marked = open(leftover, O_RDWR)
        PartFileOwner.set(marked, to: "queue-a")
        close(marked)
        guard case .success = PartFile.replace(path, with: Array("a new version".utf8), owner: "queue-a") else {
            Issue.record("the part file was not replaced")
            return
        }
        #expect(FileManager.default.contents(atPath: path) == Data("a new version".utf8))
        #expect(FileManager.default.contents(atPath: persons) == Data("notes\n".utf8), "the person's file is untouched")
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
        #expect(names == ["f.bin.part", "f.bin.part.new"], "the own leftover was used and renamed: \(names)")
    }

    /// A cancel or purge of a download without bytes of its own removes its own marked file only: a
    /// tester's cancel of a queued download deleted a person's `m.iso.part` (and a file haul had
    /// delivered under that name).
    @Test func aDownloadWithoutBytesOfItsOwnRemovesOnlyItsMarkedFile() async throws {
        try await Harness.with({ $0.maxActive = 1 }) { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/busy.bin", size: 100_000, faults: held)
            h.server.serve("/m.iso", size: 10_000)
            let busy = try await h.session.schedule(h.server.url("/busy.bin"), to: .directory(h.directory))
            try await h.wait(busy) { $0.state == .downloading }
            let persons = h.path("m.iso.part")
            #expect(FileManager.default.createFile(atPath: persons, contents: Data("a browser's half\n".utf8)))
            let queued = try await h.session.schedule(h.server.url("/m.iso"), to: .directory(h.directory))
            #expect(try #require(await h.session.snapshot()[queued]).state == .queued)
            try await h.session.cancel(queued)
            #expect(FileManager.default.contents(atPath: persons) == Data("a browser's half\n".utf8), "left alone")
            h.server.release("/busy.bin")
        }
        let directory = try TemporaryDirectory("owner")
        let own = directory.path("x.part")
        let file = try PartFile(path: own, owner: "q/1", adoptsUnmarked: false)
        file.close()
        #expect(FileSync.removePart(own, owner: "q/1", onlyMarked: true), "its own mark: removed")
        #expect(FileManager.default.createFile(atPath: own, contents: Data("x".utf8)))
        #expect(!FileSync.removePart(own, owner: "q/1", onlyMarked: true), "unmarked: left")
        #expect(FileManager.default.fileExists(atPath: own))
    }

    @Test func anotherQueuesPartFileIsNotRemovedCutOrReplaced() throws {
        let (path, directory) = try paused(by: "queue-a", 4096)
        #expect(!FileSync.removePart(path, owner: "queue-b"))
        #expect(!FileSync.cut(path, to: 100, owner: "queue-b"))
        guard case .failure(let refused) = PartFile.replace(path, with: Array("another version".utf8), owner: "queue-b") else {
            Issue.record("queue-b replaced queue-a's part file")
            return
        }
        #expect(refused.isForeign)
        #expect(FileSync.length(path) == 4096)
        #expect(PartFileOwner.mark(path: path) == "queue-a")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []) == ["f.bin.part"], "no temporary file left")
        // Its own queue can do each.
        #expect(FileSync.cut(path, to: 100, owner: "queue-a"))
        #expect(FileSync.length(path) == 100)
        guard case .success = PartFile.replace(path, with: Array("a new version".utf8), owner: "queue-a") else {
            Issue.record("queue-a could not replace its own part file")
            return
        }
        #expect(FileManager.default.contents(atPath: path) == Data("a new version".utf8))
        #expect(PartFileOwner.mark(path: path) == "queue-a", "the replacement is marked too")
        #expect(FileSync.removePart(path, owner: "queue-a"))
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A download whose part file name holds another queue's paused bytes fetches into a name of
    /// its own, places its own file, and leaves those bytes as they were; the file it places
    /// carries no queue's mark.
    @Test func aDownloadFindingAnotherQueuesPartFileFetchesIntoItsOwn() async throws {
        try await Harness.with { h in
            h.server.serve("/same.bin", size: 300_000)
            let theirs = h.path("same.bin.part")
            let writer = try PartFile(path: theirs, owner: "another-queue")
            let theirBytes = [UInt8](repeating: 9, count: 100_000)
            #expect(theirBytes.withUnsafeBytes { pwrite(writer.descriptor, $0.baseAddress, $0.count, 0) } == theirBytes.count)
            writer.close()

            let id = try await h.session.schedule(h.server.url("/same.bin"), to: .directory(h.directory))
            let done = try await h.waitCompleted(id)
            // Named as its part file, `same.bin.1.part`: the other queue's file will be `same.bin`.
            #expect(done.completedPath == h.path("same.bin.1"))
            #expect(sha256(ofFile: h.path("same.bin.1")) == h.server.sha256("/same.bin"))
            #expect(PartFileOwner.mark(path: h.path("same.bin.1")) == nil, "a placed file is the person's")
            #expect(FileManager.default.contents(atPath: theirs) == Data(theirBytes), "the other queue's bytes are untouched")
            #expect(PartFileOwner.mark(path: theirs) == "another-queue")
            #expect(h.gets("/same.bin").map(\.range) == [nil], "one fresh request: nothing sent for the other's file")
            let history = try await h.session.history(id)
            #expect(history.contains { $0.kind == .restarted && $0.text.contains("\(theirs) is another download's part file (left alone)") }, "\(history)")
        }
    }

    /// A finished file that cannot be placed (its exact path is a directory) keeps its queue's
    /// mark: its bytes stay this queue's, not free for another queue to restart over.
    @Test func aPlacementThatFailsKeepsTheMark() async throws {
        try await Harness.with { h in
            h.server.serve("/f.bin", size: 50_000)
            let target = h.path("out")
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: target + "/inside", contents: Data([1])))
            let id = try await h.session.schedule(h.server.url("/f.bin"), to: .file(target))
            let failed = try await h.wait(id) { if case .failed = $0.state { true } else { false } }
            #expect(failed.lastError?.contains("out") == true, "\(String(describing: failed.lastError))")
            let part = target + ".part"
            #expect(sha256(ofFile: part) == h.server.sha256("/f.bin"), "the finished bytes stay in the part file")
            #expect(PartFileOwner.mark(path: part) == "test-queue/\(id)")
        }
    }

    /// A leftover temporary file of a restart is never reused with its attributes: the new
    /// version's first bytes carry this queue's mark, or none, never another queue's.
    @Test func aRestartsTemporaryFileStartsWithoutAnotherQueuesMark() throws {
        let (path, directory) = try paused(by: "queue-a", 10)
        let leftover = directory.path("f.bin.part.new")
        let stale = try PartFile(path: leftover, owner: "queue-b")
        stale.close()
        #expect(PartFileOwner.mark(path: leftover) == "queue-b")
        guard case .success = PartFile.replace(path, with: Array("new".utf8), owner: nil) else {
            Issue.record("the replacement failed")
            return
        }
        #expect(FileManager.default.contents(atPath: path) == Data("new".utf8))
        #expect(PartFileOwner.mark(path: path) == nil, "not queue-b's")
    }

    /// A part file name that holds a file no download of the queue wrote: a person's notes, or a
    /// file haul itself delivered under that name. Found by use: a new download restarted over it
    /// (`no validator or length to check a resume against`) and deleted it. Now it is left alone,
    /// and the download fetches into a name of its own.
    @Test func aFileTheDownloadDidNotWriteIsLeftAlone() async throws {
        try await Harness.with { h in
            h.server.serve("/doc.pdf", size: 50_000)
            h.server.serve("/g.bin.part", size: 40_000)
            h.server.serve("/g.bin", size: 60_000)
            let notes = h.path("doc.pdf.part")
            #expect(FileManager.default.createFile(atPath: notes, contents: Data("my own notes\n".utf8)))
            let doc = try await h.session.schedule(h.server.url("/doc.pdf"), to: .directory(h.directory))
            // Named as the part file it fetched into, `doc.pdf.1.part`.
            #expect(try await h.waitCompleted(doc).completedPath == h.path("doc.pdf.1"))
            #expect(FileManager.default.contents(atPath: notes) == Data("my own notes\n".utf8), "the person's file is untouched")
            #expect(sha256(ofFile: h.path("doc.pdf.1")) == h.server.sha256("/doc.pdf"))

            // A file haul delivered as `g.bin.part`, then a download of `g.bin`.
            let delivered = try await h.session.schedule(h.server.url("/g.bin.part"), to: .directory(h.directory))
            #expect(try await h.waitCompleted(delivered).completedPath == h.path("g.bin.part"))
            let next = try await h.session.schedule(h.server.url("/g.bin"), to: .directory(h.directory))
            let done = try await h.waitCompleted(next)
            #expect(done.completedPath == h.path("g.bin.1"))
            #expect(sha256(ofFile: h.path("g.bin.part")) == h.server.sha256("/g.bin.part"), "the delivered file is untouched")
            #expect(sha256(ofFile: h.path("g.bin.1")) == h.server.sha256("/g.bin"))
            #expect(done.restartReason?.hasSuffix("holds bytes this download did not write (left alone); fetching into \(h.path("g.bin.1.part"))") == true, "\(String(describing: done.restartReason))")
        }
    }

    /// Bytes a removed download kept (`remove` keeps files) are that download's: a new download of
    /// the same URL leaves them and fetches its own. Found by use: it fetched over them.
    @Test func bytesARemovedDownloadKeptAreLeftAlone() async throws {
        try await Harness.with { h in
            h.server.serve("/f.bin", size: 200_000)
            let wrong = "sha-256=" + String(repeating: "0", count: 64)
            var options = RequestOptions()
            options.checksum = try Checksum.parse(wrong)
            let first = try await h.session.schedule(h.server.url("/f.bin"), to: .directory(h.directory), options: options)
            _ = try await h.wait(first) { if case .failed = $0.state { true } else { false } }
            let kept = h.path("f.bin.part")
            #expect(sha256(ofFile: kept) == h.server.sha256("/f.bin"), "a wrong checksum keeps the bytes")
            try await h.session.remove(first)

            let again = try await h.session.schedule(h.server.url("/f.bin"), to: .directory(h.directory))
            let done = try await h.waitCompleted(again)
            #expect(sha256(ofFile: try #require(done.completedPath)) == h.server.sha256("/f.bin"))
            #expect(sha256(ofFile: kept) == h.server.sha256("/f.bin"), "the removed download's bytes are kept")
            #expect(done.restartReason?.contains("is another download's part file (left alone)") == true, "\(String(describing: done.restartReason))")
        }
    }
}
