import Foundation
import Testing

/// Python's `http.server` serving a directory on 127.0.0.1: a server nobody here wrote.
final class PythonServer: @unchecked Sendable {
    let port: Int
    private let process: Process

    /// Starts serving `directory` on a free port; throws when Python is missing or does not start.
    init(serving directory: String) async throws {
        let portFile = directory + "/../.python-port-\(UUID().uuidString)"
        let script = """
            import http.server, os, sys
            os.chdir(sys.argv[1])
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
            with open(sys.argv[2], "w") as f: f.write(str(server.server_address[1]))
            server.serve_forever()
            """
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, directory, portFile]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer { try? FileManager.default.removeItem(atPath: portFile) }
        let deadline = Date().addingTimeInterval(20)
        while true {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text) {
                self.port = port
                return
            }
            guard process.isRunning, Date() < deadline else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw PythonServerError.didNotStart
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func url(_ target: String) -> String {
        "http://127.0.0.1:\(port)\(target)"
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

enum PythonServerError: Error {
    case didNotStart
}
