import DownloadCore
@testable import DownloadEngine
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One writer per part file: a part file open for writing is locked, and nobody else may open it
/// for writing or replace it meanwhile (two haul queues fetching files of one name into one
/// directory wrote each other's file, and one placed the other's bytes as its own).
@Suite struct PartFileLockTests {
    /// A part file `f.bin.part` in a new directory, open for writing and holding `count` bytes of
    /// `byte`: the writer, the path, and the directory (kept while the test runs).
    func writing(_ count: Int, of byte: UInt8) throws -> (writer: PartFile, path: String, directory: TemporaryDirectory) {
        let directory = try TemporaryDirectory("partlock")
        let path = directory.path("f.bin.part")
        let writer = try PartFile(path: path)
        let bytes = [UInt8](repeating: byte, count: count)
        #expect(bytes.withUnsafeBytes { pwrite(writer.descriptor, $0.baseAddress, $0.count, 0) } == bytes.count)
        return (writer, path, directory)
    }

    @Test func aPartFileBeingWrittenCannotBeOpenedAgainUntilItIsClosed() throws {
        let directory = try TemporaryDirectory("partlock")
        let path = directory.path("f.bin.part")
        let first = try PartFile(path: path)
        do {
            _ = try PartFile(path: path)
            Issue.record("a second writer opened the part file")
        } catch {
            #expect(error.isBusy)
            #expect(error.description == "another program is writing \(path) (another haul queue?); waiting for it")
        }
        first.close()
        let again = try PartFile(path: path)
        #expect(again.length == 0)
        again.close()
    }

    @Test func aPartFileBeingWrittenIsNotReplaced() throws {
        let directory = try TemporaryDirectory("partlock")
        let path = directory.path("f.bin.part")
        let writer = try PartFile(path: path)
        let written = Array("the writer's bytes".utf8)
        #expect(written.withUnsafeBytes { pwrite(writer.descriptor, $0.baseAddress, $0.count, 0) } == written.count)
        guard case .failure(let failure) = PartFile.replace(path, with: Array("another version".utf8), owner: nil) else {
            Issue.record("the part file was replaced under its writer")
            return
        }
        #expect(failure.isBusy)
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == written, "the writer's file is untouched")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["f.bin.part"], "no file left beside it")
        writer.close()
        guard case .success = PartFile.replace(path, with: Array("another version".utf8), owner: nil) else {
            Issue.record("a part file nobody writes could not be replaced")
            return
        }
        #expect(FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } == "another version")
    }

    /// A restored queue cuts a part file to its checkpoint only when nobody writes it.
    @Test func aPartFileBeingWrittenIsNotCut() throws {
        let (writer, path, directory) = try writing(4096, of: 1)
        defer { withExtendedLifetime(directory) {} }
        #expect(!FileSync.cut(path, to: 100, owner: nil))
        #expect(FileSync.length(path) == 4096)
        writer.close()
        #expect(FileSync.cut(path, to: 100, owner: nil))
        #expect(FileSync.length(path) == 100)
    }

    /// A cancel or a purge removes a part file only when nobody writes it.
    @Test func aPartFileBeingWrittenIsNotRemoved() throws {
        let directory = try TemporaryDirectory("partlock")
        let path = directory.path("f.bin.part")
        let writer = try PartFile(path: path)
        #expect(!FileSync.removePart(path, owner: nil))
        #expect(FileManager.default.fileExists(atPath: path))
        writer.close()
        #expect(FileSync.removePart(path, owner: nil))
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(FileSync.removePart(path, owner: nil), "nothing to remove is no failure")
    }

    /// A lock let go a moment later (a child process started meanwhile holds a copy of the
    /// descriptor until its `exec`): the file-work threads wait for it; an attempt does not.
    @Test func aLockLetGoAMomentLaterIsWaitedForWithPatience() throws {
        let (writer, path, directory) = try writing(10, of: 3)
        defer { withExtendedLifetime(directory) {} }
        let reader = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(reader) }
        #expect(PartFile.lock(reader, path: path)?.isBusy == true, "no patience: busy at once")
        // Let go on a thread of its own: the cooperative pool may be busy with other tests, and so
        // may Dispatch's global threads (a CI run: the lock was still held 1 s later, 9 s into the test).
        nonisolated(unsafe) let holder = writer
        // Before the thread: a loaded machine ran it 50 ms before the clock was read (99.5 ms).
        let started = ContinuousClock.now
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.15)
            holder.close()
        }
        #expect(PartFile.lock(reader, path: path, patience: PartFile.lockPatience) == nil, "taken once the holder let go")
        #expect(started.duration(to: .now) >= .milliseconds(150))
    }

    /// Its stamp is the written file's, whatever the name leads to by then.
    @Test func theStampIsTheWrittenFilesEvenWhenItsNameLeadsElsewhere() throws {
        let (writer, path, directory) = try writing(1000, of: 7)
        #expect(rename(path, directory.path("moved")) == 0)
        try Data("16 bytes, not 1k".utf8).write(to: URL(fileURLWithPath: path))
        let stamp = try #require(writer.stamp)
        #expect(stamp.size == 1000)
        let now = try #require(FileSync.stamp(path))
        #expect(stamp.change(to: now) == "16 bytes, was 1000")
        writer.close()
        #expect(writer.stamp == nil)
    }
}
