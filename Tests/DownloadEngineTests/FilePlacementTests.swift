import DownloadCore
@testable import DownloadEngine
import Foundation
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Putting a finished part file in a directory: by rename where it can, never over a file there.
@Suite struct FilePlacementTests {
    private func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    private func read(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func aMoveTakesTheNameAndLeavesNoPartFile() throws {
        let directory = try TemporaryDirectory("placement")
        let part = directory.path("f.bin.part")
        try write("the body", to: part)
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", move: true)
        #expect(placed == directory.path("f.bin"))
        #expect(read(placed) == "the body")
        #expect(!FileManager.default.fileExists(atPath: part))
    }

    @Test func aTakenNameIsNeverReplaced() throws {
        let directory = try TemporaryDirectory("placement")
        let part = directory.path("f.bin.part")
        try write("new", to: part)
        try write("a person's", to: directory.path("f.bin"))
        try write("another", to: directory.path("f.bin.1"))
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", move: true)
        #expect(placed == directory.path("f.bin.2"))
        #expect(read(placed) == "new")
        #expect(read(directory.path("f.bin")) == "a person's")
        #expect(read(directory.path("f.bin.1")) == "another")
        #expect(!FileManager.default.fileExists(atPath: part))
    }

    /// A placement whose claimed names were looked at for the first few attempts only stops,
    /// changing nothing, where it would pass them (the session then looks at all of them).
    @Test func aPlacementPastTheNamesLookedAtChangesNothingAndSaysSo() throws {
        let directory = try TemporaryDirectory("placement")
        for name in ["f.bin", "f.bin.1"] { try write("a person's", to: directory.path(name)) }
        let part = directory.path("f.bin.part")
        try write("the body", to: part)
        do {
            let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", looked: 2, move: true)
            Issue.record("placed at \(placed) past the names looked at")
        } catch {
            #expect(error.needsMoreClaims)
        }
        #expect(read(part) == "the body", "the part file stays where it was")
        #expect(!FileManager.default.fileExists(atPath: directory.path("f.bin.2")))
        // Looked at far enough, it takes the next free name.
        #expect(try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", looked: 3, move: true) == directory.path("f.bin.2"))
    }

    /// Directory syncs asked for while one runs share the next one: one sync for the first caller,
    /// one for all who came meanwhile, and none returns before a sync that started after it asked.
    @Test func directorySyncsAskedForMeanwhileShareTheNextOne() async throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let log = Mutex<[String]>([])
        let syncs = DirectorySyncs { directory in
            let count = log.withLock { log in
                log.append("start \(directory)")
                return log.filter { $0.hasPrefix("start") }.count
            }
            if count == 1 {
                started.signal()
                release.wait()
            }
            log.withLock { $0.append("end \(directory)") }
            return count == 2 ? EIO : 0
        }
        let done = DispatchGroup()
        done.enter()
        let firstThread = Thread {
            let result = syncs.sync("/d")
            log.withLock { $0.append("returned first \(result)") }
            done.leave()
        }
        firstThread.start()
        started.wait()
        for index in 0..<8 {
            done.enter()
            Thread {
                let result = syncs.sync("/d")
                log.withLock { $0.append("returned \(index) \(result)") }
                done.leave()
            }.start()
        }
        // The eight wait for the first sync to end, then share one.
        try await Task.sleep(for: .milliseconds(200))
        #expect(log.withLock { $0 } == ["start /d"], "none returned while the first sync ran")
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let events = log.withLock { $0 }
        #expect(events.filter { $0.hasPrefix("start") }.count == 2, "\(events)")
        let secondEnd = try #require(events.lastIndex(of: "end /d"))
        #expect(events.contains("returned first 0"))
        for index in 0..<8 {
            // The shared sync failed: each of its callers is told.
            let returned = try #require(events.firstIndex(of: "returned \(index) \(EIO)"), "\(events)")
            #expect(returned > secondEnd, "caller \(index) returned before a sync that started after it asked ended")
        }
        // Another caller later gets a sync of its own.
        #expect(syncs.sync("/d") == 0)
        #expect(log.withLock { $0 }.filter { $0.hasPrefix("start") }.count == 3)
    }

    @Test func aMovedFileKeepsItsPartFilesStampAndIsAmongTheCandidatesPastAGap() throws {
        let directory = try TemporaryDirectory("placement")
        // f.bin and f.bin.1 were taken when the part file moved: it took f.bin.2.
        for name in ["f.bin", "f.bin.1"] { try write("a person's", to: directory.path(name)) }
        let part = directory.path("f.bin.part")
        try write("the body", to: part)
        let stamp = try #require(FileSync.stamp(part))
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", move: true)
        #expect(placed == directory.path("f.bin.2"))
        #expect(FileSync.stamp(placed) == stamp, "a move keeps size and modification time")
        // The person removed f.bin and f.bin.1 since: the names are searched past free ones.
        for name in ["f.bin", "f.bin.1"] { unlink(directory.path(name)) }
        let found = FilePlacement.candidates(in: directory.path, name: "f.bin")
        #expect(found.map(\.path) == [placed])
        #expect(found.first?.stamp == stamp)
        #expect(FilePlacement.candidates(in: directory.path, name: "g.bin").isEmpty)
    }

    /// The second download of one name fetches into `f.bin.1.part`: its file is `f.bin.1` first,
    /// whichever download ends first, and the name searched first after a crash.
    @Test func aFirstCandidateIsTriedBeforeTheNameAndFoundPastAnyGap() throws {
        let directory = try TemporaryDirectory("placement")
        let part = directory.path("f.bin.12.part")
        try write("the twelfth", to: part)
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", first: 12, move: true)
        #expect(placed == directory.path("f.bin.12"))
        #expect(!FileManager.default.fileExists(atPath: directory.path("f.bin")))
        // Eleven free names before it: found all the same, first.
        try write("a person's", to: directory.path("f.bin.3"))
        #expect(FilePlacement.candidates(in: directory.path, name: "f.bin", first: 12).map(\.path) == [placed, directory.path("f.bin.3")])
        // Every name a placement may take, in its order: past eight free names too (a placement
        // passes over names other downloads hold, free on disk).
        #expect(FilePlacement.candidates(in: directory.path, name: "f.bin").map(\.path) == [directory.path("f.bin.3"), placed])
        // Not a name a placement of f.bin takes, nor a part file.
        for other in ["f.bin.012", "f.bin.x", "f.bin.10000", "f.bin.5.part", "f.binary"] { try write("other", to: directory.path(other)) }
        #expect(FilePlacement.candidates(in: directory.path, name: "f.bin").map(\.path) == [directory.path("f.bin.3"), placed])
        // Taken: the names from the first on, never over a file there.
        let again = directory.path("f.bin.12.part")
        try write("another twelfth", to: again)
        let next = try FilePlacement.place(again, at: .directory(directory.path), name: "f.bin", first: 12, move: true)
        #expect(next == directory.path("f.bin"))
        #expect(read(placed) == "the twelfth")
        #expect(read(next) == "another twelfth")
    }

    /// `-o` replaces a file, never one another download marked as its part file (another queue's
    /// paused bytes would be replaced, and resumed from this file).
    @Test func anExactPathThatIsAnotherDownloadsPartFileIsNotReplaced() throws {
        let directory = try TemporaryDirectory("placement")
        let theirs = directory.path("a.bin.part")
        try write("their paused bytes", to: theirs)
        let marked = open(theirs, O_RDWR)
        try #require(marked >= 0)
        PartFileOwner.set(marked, to: "another-queue/1")
        close(marked)
        let part = directory.path("c.bin.part")
        try write("the body", to: part)
        #expect(throws: FilePlacement.Failure.self) {
            try FilePlacement.place(part, at: .file(theirs), name: "c.bin", move: true)
        }
        #expect(read(theirs) == "their paused bytes")
        #expect(read(part) == "the body")
        // Unmarked: replaced, as curl -o does.
        let unmarked = open(theirs, O_RDWR)
        PartFileOwner.clear(unmarked)
        close(unmarked)
        #expect(try FilePlacement.place(part, at: .file(theirs), name: "c.bin", move: true) == theirs)
        #expect(read(theirs) == "the body")
    }

    /// A part file's path in /dev/shm, another file system than `directory`'s.
    func partOnAnotherFileSystem(than directory: TemporaryDirectory) throws -> String {
        var shm = stat()
        var here = stat()
        try #require(stat("/dev/shm", &shm) == 0 && stat(directory.path, &here) == 0, "needs /dev/shm")
        try #require(shm.st_dev != here.st_dev, "/dev/shm is another file system than the temporary directory")
        return "/dev/shm/haul-placement-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).part"
    }

    /// A part file on another file system cannot be renamed (nor linked) there: it is copied into a
    /// new file and then removed, still never over a file there.
    @Test func aMoveToAnotherFileSystemCopies() throws {
        let directory = try TemporaryDirectory("placement")
        let part = try partOnAnotherFileSystem(than: directory)
        defer { unlink(part) }
        try write("across", to: part)
        try write("a person's", to: directory.path("f.bin"))
        let partStamp = try #require(FileSync.stamp(part))
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", move: true)
        #expect(placed == directory.path("f.bin.1"))
        #expect(read(placed) == "across")
        // The copy has the part file's times: a recovery knows it by the part file's stamp.
        #expect(FileSync.stamp(placed) == partStamp)
        #expect(read(directory.path("f.bin")) == "a person's")
        #expect(!FileManager.default.fileExists(atPath: part))
    }

    /// A copy is made beside its name, under a name of its own made exclusively, and given the
    /// name once whole: a tester's kill -9 half-way through a copy left a truncated file under the
    /// name itself. Files already beside it stay: a fixed temporary name, removed first, deleted a
    /// person's file, and two placements of one name at once removed each other's (one requester
    /// got the other URL's bytes, exit 0).
    @Test func aCopyIsMadeBesideItsNameAndGivenItWhole() throws {
        let directory = try TemporaryDirectory("placement")
        let part = try partOnAnotherFileSystem(than: directory)
        defer { unlink(part) }
        try write("the whole file", to: part)
        try write("a person's", to: directory.path("f.bin.haul-copy"))
        try write("a person's too", to: directory.path("g.bin.haul-tmp"))
        let placed = try FilePlacement.place(part, at: .directory(directory.path), name: "f.bin", move: false)
        #expect(placed == directory.path("f.bin"))
        #expect(read(placed) == "the whole file")
        #expect(try FilePlacement.place(part, at: .file(directory.path("g.bin")), name: "g.bin", move: false) == directory.path("g.bin"))
        #expect(read(directory.path("g.bin")) == "the whole file")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["f.bin", "f.bin.haul-copy", "g.bin", "g.bin.haul-tmp"], "nothing else left beside them")
        #expect(read(directory.path("f.bin.haul-copy")) == "a person's" && read(directory.path("g.bin.haul-tmp")) == "a person's too")
        #expect(read(part) == "the whole file")
    }

    /// A copy for a further requester (`move` false) leaves the part file for the move that follows.
    @Test func aCopyForAnotherRequesterKeepsThePartFile() throws {
        let directory = try TemporaryDirectory("placement")
        let part = directory.path("f.bin.part")
        try write("shared", to: part)
        let other = directory.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        let placed = try FilePlacement.place(part, at: .directory(other), name: "f.bin", move: false)
        #expect(placed == other + "/f.bin")
        #expect(read(placed) == "shared")
        #expect(read(part) == "shared")
    }

    /// What an earlier placement made for a requester (a link, or a copy with the part file's
    /// stamp) is found, and nothing else: not a file named so with another stamp, not one taken.
    @Test func anEarlierPlacementIsFoundByTheSourcesStamp() throws {
        let directory = try TemporaryDirectory("placement")
        let part = directory.path("f.bin.part")
        try write("shared", to: part)
        let stamp = try #require(FileSync.stamp(part))
        let other = directory.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .directory(other), name: "f.bin", besides: []) == nil)
        try write("a person's", to: other + "/f.bin")
        #expect(link(part, other + "/f.bin.1") == 0)
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .directory(other), name: "f.bin", besides: []) == other + "/f.bin.1")
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .directory(other), name: "f.bin", besides: [other + "/f.bin.1"]) == nil)
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .file(other + "/f.bin.1"), name: "f.bin", besides: []) == other + "/f.bin.1")
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .file(other + "/f.bin"), name: "f.bin", besides: []) == nil)
        // Two files with the stamp (another download's copy from the same tick, made by the
        // process that died with this one's): neither is taken (a tester's requester got another
        // URL's copy).
        #expect(link(part, other + "/f.bin.2") == 0)
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .directory(other), name: "f.bin", besides: []) == nil)
        #expect(FilePlacement.earlierPlacement(of: stamp, at: .directory(other), name: "f.bin", besides: [other + "/f.bin.2"]) == other + "/f.bin.1")
    }
}
