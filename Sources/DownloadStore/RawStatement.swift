import GRDB
import GRDBSQLite

/// A cached statement whose parameters are bound straight through SQLite's C API and that runs in
/// the caller's transaction, as often as it is bound again: for the statements a commit runs per
/// row. Taken once per commit, not once per row: GRDB's cache is keyed by the SQL text, and hashing
/// the row's 3 KB upsert cost 13,000 instructions a row.
///
/// Through GRDB's `StatementArguments` a value cost about a thousand instructions to convert and
/// check (callgrind, 300 small files: the download row's upsert, 44 parameters, took 140,000
/// instructions, two thirds of them arguments). The statements bound here observe nothing and are
/// observed by nothing (the store registers no transaction observer), so GRDB's bookkeeping around
/// a step has nothing to do for them.
struct RawStatement: ColumnSink {
    /// GRDB's statement, held so that the raw one lives as long as this (GRDB's cache may let go of
    /// it meanwhile).
    private let statement: Statement
    private var raw: SQLiteStatement { statement.sqliteStatement }
    private let db: Database
    private var index: Int32 = 0
    /// The first value SQLite refused since the last run (too many values, too large a one): the
    /// run throws it. Binding cannot fail on its own, so that a row hands its values over one by
    /// one through `ColumnSink`, which a list of values takes too.
    private var refused: DatabaseError?

    /// The statement for `sql` from the connection's cache, its bindings cleared.
    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
        self.db = db
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    /// SQLite's own copy of text: the bytes may go once the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    mutating func bind(_ value: String?) {
        index += 1
        guard let value else { return check(sqlite3_bind_null(raw, index)) }
        let length = Int32(value.utf8.count)
        let code = value.withCString { text in sqlite3_bind_text(raw, index, text, length, Self.transient) }
        check(code)
    }

    mutating func bind(_ value: Int64?) {
        index += 1
        guard let value else { return check(sqlite3_bind_null(raw, index)) }
        check(sqlite3_bind_int64(raw, index, value))
    }

    mutating func bind(_ value: Int?) {
        bind(value.map(Int64.init))
    }

    mutating func bind(_ value: Bool) {
        bind(Int64(value ? 1 : 0))
    }

    /// Runs the statement to its end, then lets go of its bindings, ready to be bound again; throws
    /// SQLite's error as GRDB words one (the store words it for people).
    mutating func run() throws {
        defer { unbind() }
        try checkAllBound()
        while true {
            let code = sqlite3_step(raw)
            if code == SQLITE_DONE { return }
            if code != SQLITE_ROW { throw error(code) }
        }
    }

    /// Runs a query and returns its first row's first column as an integer (nil: no row), then
    /// lets go of its bindings, as `run` does.
    mutating func value() throws -> Int64? {
        defer { unbind() }
        try checkAllBound()
        let code = sqlite3_step(raw)
        if code == SQLITE_DONE { return nil }
        if code != SQLITE_ROW { throw error(code) }
        return sqlite3_column_int64(raw, 0)
    }

    /// Settles what GRDB did not see after a failed commit of rows bound here: a failed step may
    /// make SQLite roll the transaction back on its own (a full disk, an I/O error), and GRDB
    /// learns of a rollback only when one of its own statements ends (else the next transaction
    /// trips its check that none is open). Any statement of GRDB's, outside a transaction, will do.
    static func settle(_ writer: any DatabaseWriter) {
        _ = try? writer.writeWithoutTransaction { db in try db.execute(sql: "SELECT 1") }
    }

    /// Ready to be bound again, whatever the last run did.
    private mutating func unbind() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        index = 0
        refused = nil
    }

    /// A value SQLite refused, or too few values (not NULLs in the last parameters), is an error.
    private func checkAllBound() throws {
        if let refused { throw refused }
        guard Int(sqlite3_bind_parameter_count(raw)) == Int(index) else {
            throw DatabaseError(resultCode: .SQLITE_RANGE, message: "\(index) values bound to \(sqlite3_bind_parameter_count(raw)) parameters", sql: statement.sql)
        }
    }

    /// Keeps the first refusal for the run.
    private mutating func check(_ code: Int32) {
        if code != SQLITE_OK, refused == nil { refused = error(code) }
    }

    private func error(_ code: Int32) -> DatabaseError {
        let message = db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
    }
}
