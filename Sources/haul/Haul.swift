import ArgumentParser
import DownloadCore
import Foundation

/// The `haul` command: a download manager that never throws downloaded bytes away.
struct Haul: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "A download manager that never throws downloaded bytes away.",
        discussion: "Resumes with Range and If-Range, checks validators, and restarts cleanly when the resource changed.",
        version: "0.1.0",
        subcommands: [UI.self, Get.self, Add.self, List.self, Pause.self, Resume.self, Cancel.self, Remove.self, Start.self, Stop.self, Demo.self],
        defaultSubcommand: UI.self
    )
}

@main
enum Main {
    /// Parses and runs; usage errors exit 2 (not ArgumentParser's 64), after one line on stderr.
    static func main() async {
        #if canImport(Glibc)
        // glibc gives a thread that meets a locked heap an arena of its own, up to eight a core:
        // with sixteen transfers and the file-work threads that was 6.8 MiB of haul's 45 MiB peak
        // on a thousand small files, for no CPU saved (7 runs in turns: 1.17 s of CPU without the
        // limit, 1.11 s with it; one download 31.1 MiB without, 30.7 with).
        _ = glibcMallopt(-8 /* M_ARENA_MAX in malloc.h */, 2)
        // A small file's body is held in memory while its head is decided on (up to 100 KiB and
        // a grown copy): glibc gave freed memory back to the kernel at once (its thresholds follow
        // the largest block freed so far), and the next file's buffers met fresh pages, each a
        // page fault and a page of zeros: 9,500-16,600 faults on a thousand small files, where
        // curl took 3,300. Freed memory now stays while under 2 MiB at a heap's top, and only
        // blocks of 1 MiB or more get mappings of their own: 2,950 faults, CPU 0.56 → 0.51 s,
        // system time 0.32 → 0.25 s (9 runs in turns on a journaled ext4); peak RSS 2 MiB more
        // on the thousand files, 1 MiB more on one download.
        _ = glibcMallopt(-1 /* M_TRIM_THRESHOLD */, 2 << 20)
        _ = glibcMallopt(-3 /* M_MMAP_THRESHOLD */, 1 << 20)
        #endif
        do {
            var command = try Haul.parseAsRoot(CommandLineWords.joiningNegativeValues(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let exit as ExitCode {
            Haul.exit(withError: exit)
        } catch let error as UsageError {
            writeError("haul: error: \(error.message)\n")
            Haul.exit(withError: ExitCode(2))
        } catch let error as DiskFault {
            writeError("haul: error: \(error.message)\n")
            Haul.exit(withError: ExitCode(1))
        } catch let error as RunnerGone {
            writeError("haul: \(error.message)\n")
            Haul.exit(withError: ExitCode(1))
        } catch {
            if Haul.exitCode(for: error) == .validationFailure {
                let message = Haul.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
                writeError("haul: \(CommandLineWords.usageLine(message))\n")
                Haul.exit(withError: ExitCode(2))
            }
            Haul.exit(withError: error)
        }
    }
}

#if canImport(Glibc)
/// glibc's `mallopt`, whose header (malloc.h) Swift's Glibc module does not include.
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif

/// Writes to stderr with `write(2)`: a terminal that went away (SIGHUP) fails the write, not the
/// process (Foundation's `FileHandle.write` traps on EIO).
func writeError(_ text: String) {
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
    }
}

/// Bad input found after parsing: one line on stderr, exit 2, nothing changed.
struct UsageError: Error {
    var message: String
}

/// The queue's disk is full or failing: said like bad input, in one line, but exit 1.
struct DiskFault: Error {
    var message: String
}

/// The command line between the shell and the parser, and the parser's complaints in haul's words.
enum CommandLineWords {
    /// The parser takes any word that starts with `-` for an option: `-j -3` said "Missing value"
    /// for a value that was given. A negative number right after an option is joined to it
    /// (`-j=-3`), and haul's own check refuses it in its words. Nothing after `--` is touched.
    static func joiningNegativeValues(_ words: [String]) -> [String] {
        var result: [String] = []
        result.reserveCapacity(words.count)
        var index = 0
        while index < words.count {
            let word = words[index]
            if word == "--" {
                result += words[index...]
                break
            }
            if word.count > 1, word.hasPrefix("-"), !word.contains("="), !isNegativeNumber(word),
               index + 1 < words.count, isNegativeNumber(words[index + 1]) {
                result.append(word + "=" + words[index + 1])
                index += 2
                continue
            }
            result.append(word)
            index += 1
        }
        return result
    }

    /// `-3`, `-0.5`, `-5K`: a minus, then a digit (or a point and a digit).
    static func isNegativeNumber(_ word: String) -> Bool {
        let rest = word.utf8.dropFirst()
        guard word.utf8.first == UInt8(ascii: "-"), let first = rest.first else { return false }
        if first == UInt8(ascii: ".") { return rest.dropFirst().first.map { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } ?? false }
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
    }

    /// The first line of the parser's message as haul says things: `error: `, lower case, the
    /// option's name without its value placeholder, nothing a terminal would act on.
    static func usageLine(_ message: String) -> String {
        var line = message
        if let option = between(message, "Missing value for '", "'") {
            line = "\(name(option)) needs a value"
        } else if let option = between(message, "The option '", "' does not take any value") {
            line = "\(option) takes no value"
        } else if message.hasPrefix("The value '"), let value = between(message, "The value '", "' is invalid for '"),
                  let option = between(message, "' is invalid for '", "'") {
            line = "\(name(option)) does not take '\(value)'"
        } else if let first = message.first, first.isUppercase, message.dropFirst().first?.isLowercase == true {
            line = first.lowercased() + message.dropFirst()
        }
        return "error: " + TerminalText.sanitize(line)
    }

    /// The text between the first `start` and the `end` after it.
    private static func between(_ text: String, _ start: String, _ end: String) -> String? {
        guard let open = text.range(of: start), let close = text.range(of: end, range: open.upperBound..<text.endIndex) else { return nil }
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// `--connections <n>` → `--connections`.
    private static func name(_ option: String) -> String {
        option.split(separator: " ").first.map(String.init) ?? option
    }
}
