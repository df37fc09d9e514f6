import Foundation
import Testing
import TestSupport

/// Python's `http.server` serving a directory on 127.0.0.1: a server nobody here wrote.
final class PythonServer: ChildServer, @unchecked Sendable {
    static let scheme = "http"
    let port: Int
    let process: ChildProcess

    /// Starts serving `directory` on a free port; throws when Python is missing or does not start.
    ///
    /// With `byteNames`, an escape of a byte that is not UTF-8 names that byte of a file name
    /// (`/caf%E9.bin` is `caf\xE9.bin`, as an old Latin-1 server has it): Python's own handler
    /// decodes such an escape to U+FFFD and answers 404, to curl too. Only that decoding changes.
    init(serving directory: String, byteNames: Bool = false) async throws {
        let portFile = directory + "/../.python-port-\(UUID().uuidString)"
        let script = """
            import http.server, os, sys, urllib.parse
            class ByteNames(http.server.SimpleHTTPRequestHandler):
                def translate_path(self, path):
                    path = path.split("?", 1)[0].split("#", 1)[0]
                    parts = [urllib.parse.unquote(p, errors="surrogateescape") for p in path.split("/")]
                    return os.path.join(os.getcwd(), *[p for p in parts if p not in ("", ".", "..")])
            os.chdir(sys.argv[1])
            handler = ByteNames if sys.argv[3] == "1" else http.server.SimpleHTTPRequestHandler
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            with open(sys.argv[2], "w") as f: f.write(str(server.server_address[1]))
            server.serve_forever()
            """
        process = try ChildProcess("/usr/bin/env", ["python3", "-c", script, directory, portFile, byteNames ? "1" : "0"])
        defer { try? FileManager.default.removeItem(atPath: portFile) }
        let deadline = Date().addingTimeInterval(20)
        while true {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text) {
                self.port = port
                return
            }
            guard process.isRunning, Date() < deadline else {
                process.send(SIGKILL)
                await process.wait()
                throw ChildServerError.didNotStart
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
