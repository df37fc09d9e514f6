/// Where a requester wants its copy of a download.
public enum Destination: Sendable, Hashable, Codable {
    /// Exactly this path (an existing file there is replaced, as `curl -o` does).
    case file(String)
    /// A new file in this directory, named by the server's Content-Disposition, else the URL;
    /// an existing file is never overwritten: `.1`, `.2` … are added.
    case directory(String)

    /// The path or directory, for display.
    public var path: String {
        switch self {
        case .file(let path), .directory(let path): path
        }
    }
}
