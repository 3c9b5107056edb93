package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// Dialect names the SQL dialect of a DB. The sink writes the same statements to both;
// only the placeholders differ.
type Dialect int

// The dialects Open knows.
const (
	// SQLite is modernc.org/sqlite (pure Go, SQLite 3.24 or later for upserts).
	SQLite Dialect = iota + 1
	// Postgres is PostgreSQL through github.com/jackc/pgx/v5/stdlib (9.5 or later for
	// ON CONFLICT).
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// Placeholder returns the n-th (from 1) bind parameter in d's syntax: "$n" for
// PostgreSQL, "?" for SQLite. Use it in an After hook that writes SQL of its own.
func (d Dialect) Placeholder(n int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// SQLite connection settings Open applies unless the URL sets them itself.
const (
	// SQLiteBusyTimeout is how long a SQLite statement waits for a lock held by another
	// connection or process before failing with SQLITE_BUSY, in milliseconds.
	SQLiteBusyTimeout = 5000
)

// DB is a database the sink writes to: a *sql.DB and its dialect. Make one with Open;
// several sink bolts (and other code) may share it.
type DB struct {
	// SQL is the pool. For SQLite it holds one connection (SQLite has one writer at a
	// time; a second pooled writer would only wait on the lock).
	SQL *sql.DB
	// Dialect tells which SQL the database speaks.
	Dialect Dialect
	// name is the URL with any password replaced, for errors.
	name string
	// path and file are a SQLite database's file and what it was at Open (nil:
	// not checked, e.g. in memory): see checkFile.
	path string
	file os.FileInfo
}

// ErrFileGone is wrapped by the error of a write to a SQLite database whose file
// was deleted or replaced since Open: a sink outage (the connection would write
// into a file no one reads), until the operator restores the file and restarts.
var ErrFileGone = errors.New("sink database file gone")

// checkFile reports ErrFileGone if the SQLite file at the path is no longer the
// one opened: deleted (unlinked: SQLite goes on writing into the open inode, which
// vanishes with the process) or replaced (a copy renamed over it). One stat, cheap
// beside a commit that reaches the disk.
func (db *DB) checkFile() error {
	if db.file == nil {
		return nil
	}
	fi, err := os.Stat(db.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was deleted while open: its rows would go to a file no one reads; restore it (or leave it gone for a fresh one, then rebuild it from the log) and restart", ErrFileGone, db.path)
	case err != nil:
		return fmt.Errorf("%w: checking %s: %w", ErrFileGone, db.path, err)
	case !os.SameFile(fi, db.file):
		return fmt.Errorf("%w: %s was replaced by another file while open: its rows would go to the old one, which no one reads; restart to write to the new one", ErrFileGone, db.path)
	}
	return nil
}

// String returns the URL the DB was opened with, without its password.
func (db *DB) String() string { return db.name }

// Close closes the pool. Bolts still using the DB then fail their batches.
func (db *DB) Close() error { return db.SQL.Close() }

// Open opens the database named by rawURL and checks that it answers (a ping bounded
// by ctx):
//
//   - "postgres://..." or "postgresql://..." is PostgreSQL through pgx's database/sql
//     driver ("pgx"); every URL parameter pgx knows works (sslmode, connect_timeout,
//     and any other key is sent as a run-time parameter, e.g. search_path=myschema).
//   - "sqlite:PATH", "file:PATH" (a SQLite URI, kept whole) or a plain PATH is SQLite
//     through modernc.org/sqlite ("sqlite"). The file is created if missing. Open sets
//     journal_mode=WAL, synchronous=FULL (a COMMIT has reached the disk when it
//     returns: the sink acks only what survives a power cut), busy_timeout
//     (SQLiteBusyTimeout ms), BEGIN IMMEDIATE transactions (the write lock is taken at
//     BEGIN, so a transaction never fails midway on an upgrade) and the "sqlite" time
//     format for time.Time values (the driver's default would store Go's String form,
//     monotonic clock reading included). A setting the URL gives itself (e.g.
//     "sqlite:x.db?_synchronous=NORMAL") is kept. The pool holds one connection.
//
// rawURL may also name the URL by reference, env:NAME or @PATH (see ResolveURL).
//
// Errors name the URL with its password replaced by "xxxxx" and wrap the cause (%w).
func Open(ctx context.Context, rawURL string) (*DB, error) {
	rawURL, err := ResolveURL(rawURL)
	if err != nil {
		return nil, err
	}
	switch {
	case hasPrefixFold(rawURL, "postgres://"), hasPrefixFold(rawURL, "postgresql://"):
		return openPostgres(ctx, rawURL)
	case rawURL == "":
		return nil, errors.New("sink: open: empty database URL")
	case keyValueDSN.MatchString(rawURL):
		// Not echoed: such a string usually holds password=.
		return nil, errors.New("sink: open: a key=value connection string (host=... user=...): give PostgreSQL's as a postgres:// URL (it would have been taken for an SQLite file name)")
	case strings.Contains(rawURL, "://") && !hasPrefixFold(rawURL, "sqlite:") && !hasPrefixFold(rawURL, "file:"):
		scheme, _, _ := strings.Cut(rawURL, "://")
		return nil, fmt.Errorf("sink: open: database URL scheme %q: want postgres:// or postgresql://, or an SQLite file (a path, or sqlite:PATH)", scheme)
	default:
		return openSQLite(ctx, rawURL)
	}
}

// keyValueDSN matches libpq's keyword/value form ("host=h user=u dbname=d").
var keyValueDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func openPostgres(ctx context.Context, rawURL string) (*DB, error) {
	name := redact(rawURL)
	pool, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, fmt.Errorf("sink: open %s: %w", name, err)
	}
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sink: open %s: %w", name, err)
	}
	return &DB{SQL: pool, Dialect: Postgres, name: name}, nil
}

// redact returns a PostgreSQL URL without its password (userinfo or query parameter).
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		// Do not echo what may hold a password.
		scheme, _, _ := strings.Cut(rawURL, "://")
		return scheme + "://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// sqliteDefaults are the settings Open adds to a SQLite DSN, each with the keys that
// set it (the driver's key and alias, and the PRAGMA name inside a _pragma value).
var sqliteDefaults = []struct {
	keys   []string
	pragma string
	value  string
}{
	{[]string{"_journal_mode", "_journal"}, "journal_mode", "_journal_mode=WAL"},
	{[]string{"_synchronous", "_sync"}, "synchronous", "_synchronous=FULL"},
	{[]string{"_busy_timeout", "_timeout"}, "busy_timeout", "_busy_timeout=" + strconv.Itoa(SQLiteBusyTimeout)},
	{[]string{"_txlock"}, "", "_txlock=immediate"},
	{[]string{"_time_format", "_time_integer_format"}, "", "_time_format=sqlite"},
}

func openSQLite(ctx context.Context, rawURL string) (*DB, error) {
	name := rawURL
	dsn := rawURL
	if hasPrefixFold(dsn, "sqlite:") {
		dsn = dsn[len("sqlite:"):]
	}
	if dsn == "" {
		return nil, fmt.Errorf("sink: open %s: empty SQLite path", name)
	}
	dsn, err := sqliteDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("sink: open %s: %w", name, err)
	}
	pool, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sink: open %s: %w", name, err)
	}
	pool.SetMaxOpenConns(1)
	pool.SetMaxIdleConns(1)
	pool.SetConnMaxLifetime(0)
	pool.SetConnMaxIdleTime(0)
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sink: open %s: %w", name, err)
	}
	db := &DB{SQL: pool, Dialect: SQLite, name: name, path: sqliteFile(dsn)}
	if db.path != "" {
		// The ping opened (and created) it; a path not found is not checked.
		if fi, err := os.Stat(db.path); err == nil && fi.Mode().IsRegular() {
			db.file = fi
		}
	}
	return db, nil
}

// sqliteFile returns the file of a SQLite DSN (a path or a file: URI, with a
// query), "" for an in-memory database.
func sqliteFile(dsn string) string {
	base, query, _ := strings.Cut(dsn, "?")
	if q, err := url.ParseQuery(query); err == nil && q.Get("mode") == "memory" {
		return ""
	}
	if hasPrefixFold(base, "file:") {
		base = base[len("file:"):]
		if strings.HasPrefix(base, "//") { // file://host/path: the path
			if i := strings.Index(base[2:], "/"); i >= 0 {
				base = base[2+i:]
			} else {
				return ""
			}
		}
		if p, err := url.PathUnescape(base); err == nil {
			base = p
		}
	}
	if base == "" || base == ":memory:" {
		return ""
	}
	return base
}

// sqliteDSN adds the settings of sqliteDefaults that path's query does not set.
func sqliteDSN(path string) (string, error) {
	base, query, _ := strings.Cut(path, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("query %q: %w", query, err)
	}
	var add []string
	for _, d := range sqliteDefaults {
		set := false
		for _, k := range d.keys {
			set = set || q.Has(k)
		}
		for _, p := range q["_pragma"] {
			set = set || (d.pragma != "" && strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), d.pragma))
		}
		if !set {
			add = append(add, d.value)
		}
	}
	if query != "" {
		add = append([]string{query}, add...)
	}
	return base + "?" + strings.Join(add, "&"), nil
}
