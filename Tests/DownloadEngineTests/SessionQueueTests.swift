import DownloadCore
import DownloadEngine
import Foundation
import Synchronization
import Testing

/// The session as a `QueueControl`: its snapshots to many readers, and what it remembers.
@Suite struct SessionQueueTests {
    @Test func everySubscriberGetsTheNewestPictureAndMaxActiveIsRemembered() async throws {
        try await Harness.with { h in
            let saved = Mutex<[Int]>([])
            let queue = SessionQueue(session: h.session, onStop: {}, onMaxActive: { count in saved.withLock { $0.append(count) } })
            let first = queue.snapshots()
            let second = queue.snapshots()
            try await queue.setMaxActive(5)
            #expect(saved.withLock { $0 } == [5], "a new number is remembered whoever set it")
            // Both readers reach the picture with 5 at once; neither needed the other to read.
            for stream in [first, second] {
                var sawFive = false
                for await snapshot in stream where snapshot.maxActive == 5 {
                    sawFive = true
                    break
                }
                #expect(sawFive)
            }
            await #expect(throws: QueueControlError.self) { try await queue.pause(DownloadID(42)) }
        }
    }
}
