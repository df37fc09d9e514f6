// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "haul",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "haul", targets: ["haul"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // Already in the graph through AsyncHTTPClient; named directly for `--ca-certificate`
        // (AsyncHTTPClient takes trust roots as a NIOSSL `TLSConfiguration`) and for the loopback
        // server's HTTPS mode (the TLS fault tests).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        // Pure values: downloads, states, the state machine, snapshots, formatting. No I/O but the
        // destination checks the command line and the control socket share (LocalDirectory).
        .target(name: "DownloadCore"),
        // The session actor, one Transfer per HTTP attempt, part files. The only AsyncHTTPClient user.
        .target(
            name: "DownloadEngine",
            dependencies: [
                "DownloadCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The proxy bridge's listeners and its connections to the real proxy.
                .product(name: "NIOPosix", package: "swift-nio"),
                // TLSUserEvent, for the probe that tells a TLS port from a closing one.
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // splice(2) for plain-http bodies (DirectStream).
                "CSplice",
            ]
        ),
        // The Linux calls Glibc's module leaves out (splice, pipe sizes; a rename that never replaces):
        // DirectStream's kernel copy, FilePlacement's move.
        .target(name: "CSplice"),
        // The durable queue: one AppDatabase facade over SQLite (WAL), the state directory and its lock.
        // The only GRDB user.
        .target(
            name: "DownloadStore",
            dependencies: [
                "DownloadCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the statements a commit binds per row (`RawStatement`).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // A SwiftNIO HTTP/1.1 server with Range, validators and fault injection (demo and tests).
        .target(
            name: "LoopbackServer",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The runner's control socket (<state>/haul.sock, HTTP/1.1 and JSON) and its client, both
        // QueueControl. No AsyncHTTPClient: NIO's HTTP/1.1 codec on a Unix socket.
        .target(
            name: "ControlSocket",
            dependencies: [
                "DownloadCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The view state, the key table and a pure render(state) -> Frame. No curses, no engine.
        .target(name: "TerminalUI", dependencies: ["DownloadCore"]),
        // ncursesw, linked by name (no pkg-config: SwiftPM would drop its -D flags with a warning);
        // the shim turns the wide API on and wraps the macros Swift cannot import.
        .systemLibrary(name: "CNCurses", providers: [.apt(["libncurses-dev"])]),
        // The only code that calls curses, all on one dedicated thread.
        .target(name: "CursesBackend", dependencies: ["CNCurses", "TerminalUI"]),
        .executableTarget(
            name: "haul",
            dependencies: [
                "DownloadCore",
                "DownloadEngine",
                "DownloadStore",
                "TerminalUI",
                "CursesBackend",
                "ControlSocket",
                "LoopbackServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Release builds only: a test bundle links this target's objects too, and the testing
            // libraries have no static form.
            // One download's memory is mostly code pages (issue 20). Linked this way a run maps
            // about 31 MiB where the shared runtime took 39:
            // - the Swift runtime and Foundation linked in (`-static-stdlib`): no relocations of
            //   seven more libraries at start, and only the code haul uses;
            // - the executable's own symbols not exported (`-static-stdlib` exports them all, for
            //   `dlsym`, which haul never does): 37,000 symbols fewer for the loader to look through;
            // - relative relocations packed (`pack-relative-relocs`, which needs lld and glibc 2.36):
            //   2.9 MiB of relocation records become 24 KiB.
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib", "-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                    // Foundation's own static parts, which only a module compiled with
                    // `-static-stdlib` names for the linker.
                    "-l_FoundationICU", "-lCoreFoundation", "-l_FoundationCShims", "-l_FoundationCollections",
                ], .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // What the test targets share: polling, sha256 and lengths of files, temporary directories
        // removed with their test, child processes (the haul binary, tmux) waited for off the
        // cooperative pool. A plain target under Tests/, linked by the test targets only.
        .target(
            name: "TestSupport",
            dependencies: ["DownloadCore", .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/TestSupport"
        ),
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"]),
        .testTarget(name: "DownloadCoreTests", dependencies: ["DownloadCore", "TestSupport"]),
        // Snapshots are read through #filePath, not bundled.
        .testTarget(name: "TerminalUITests", dependencies: ["DownloadCore", "TerminalUI", "TestSupport"], exclude: ["Snapshots"]),
        .testTarget(
            name: "DownloadEngineTests",
            dependencies: [
                "DownloadCore",
                "DownloadEngine",
                "DownloadStore",
                "LoopbackServer",
                "TestSupport",
                // HTTPClientError, which DirectStream's errors share with the client's.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "DownloadStoreTests",
            dependencies: [
                "DownloadCore", "DownloadStore", "TestSupport", .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's own limits, to make it refuse a value bound through `RawStatement`.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "LoopbackServerTests",
            dependencies: [
                "LoopbackServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // A real socket in a temporary directory, a real session and the loopback server; curl as a client.
        .testTarget(
            name: "ControlSocketTests",
            dependencies: [
                "ControlSocket",
                "DownloadCore",
                "DownloadEngine",
                "LoopbackServer",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Runs the real `haul` binary as a subprocess against the loopback server.
        .testTarget(
            name: "haulTests",
            dependencies: [
                "haul",
                "LoopbackServer",
                "TestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
