package sink

import (
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every SQLite form opens the same kind of database, with the durability settings.
func TestOpenSQLiteSettings(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{
		"sqlite:" + filepath.Join(dir, "a.db"),
		"file:" + filepath.Join(dir, "b.db"),
		filepath.Join(dir, "c.db"),
		"SQLite:" + filepath.Join(dir, "d.db") + "?_foreign_keys=1",
	} {
		t.Run(u, func(t *testing.T) {
			db := mustOpen(t, u)
			defer db.Close()
			eq(t, "dialect", db.Dialect, SQLite)
			eq(t, "String", db.String(), u)
			eq(t, "max open connections", db.SQL.Stats().MaxOpenConnections, 1)
			var journal string
			var sync, busy int
			if err := db.SQL.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil {
				t.Fatal(err)
			}
			if err := db.SQL.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if err := db.SQL.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil {
				t.Fatal(err)
			}
			eq(t, "journal_mode", journal, "wal")
			eq(t, "synchronous (2 = FULL)", sync, 2)
			eq(t, "busy_timeout", busy, SQLiteBusyTimeout)
		})
	}
	t.Run("URL settings win", func(t *testing.T) {
		db := mustOpen(t, "sqlite:"+filepath.Join(dir, "e.db")+"?_synchronous=NORMAL&_pragma=busy_timeout(100)")
		defer db.Close()
		var sync, busy int
		if err := db.SQL.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.SQL.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		eq(t, "synchronous (1 = NORMAL)", sync, 1)
		eq(t, "busy_timeout", busy, 100)
	})
}

func TestSQLiteDSN(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/x/a.db", "/x/a.db?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000&_txlock=immediate&_time_format=sqlite"},
		{"file:a.db?mode=rwc&_txlock=deferred", "file:a.db?mode=rwc&_txlock=deferred&_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000&_time_format=sqlite"},
		{"a.db?_journal=DELETE&_sync=OFF&_timeout=1&_time_integer_format=unix", "a.db?_journal=DELETE&_sync=OFF&_timeout=1&_time_integer_format=unix&_txlock=immediate"},
		{"a.db?_pragma=Journal_Mode(DELETE)", "a.db?_pragma=Journal_Mode(DELETE)&_synchronous=FULL&_busy_timeout=5000&_txlock=immediate&_time_format=sqlite"},
	} {
		got, err := sqliteDSN(c.in)
		if err != nil {
			t.Fatal(err)
		}
		eq(t, c.in, got, c.want)
	}
	if _, err := sqliteDSN("a.db?x=%zz"); err == nil {
		t.Error("a malformed query was accepted")
	}
}

// Errors name the URL without its password and wrap the cause.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A port nothing listens on: connection refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, c := range []struct{ url, want string }{
		{"postgres://gale:s3cret@" + addr + "/gale?sslmode=disable&connect_timeout=5", "postgres://gale:xxxxx@" + addr + "/gale?sslmode=disable&connect_timeout=5"},
		{"postgresql://gale@" + addr + "/gale?password=s3cret&sslmode=disable", "postgresql://gale@" + addr + "/gale?password=xxxxx&sslmode=disable"},
		{"sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), "no/such/dir/x.db"},
		{"sqlite:", "empty SQLite path"},
		{"", "empty database URL"},
		{"host=127.0.0.1 user=gale password=s3cret dbname=gale", "key=value connection string"},
		{"mysql://gale:s3cret@" + addr + "/gale", `scheme "mysql"`},
	} {
		db, err := Open(ctx, c.url)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cret") {
			t.Errorf("Open error shows the password: %v", err)
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("Open error %q does not name %q", msg, c.want)
		}
		if c.url != "" && c.url != "sqlite:" && !strings.Contains(msg, "key=value") && !strings.Contains(msg, "scheme") && errors.Unwrap(err) == nil {
			t.Errorf("Open error %q wraps no cause", msg)
		}
	}
}

func TestRedact(t *testing.T) {
	eq(t, "userinfo", redact("postgres://u:p@h/d"), "postgres://u:xxxxx@h/d")
	eq(t, "no password", redact("postgres://u@h/d?sslmode=disable"), "postgres://u@h/d?sslmode=disable")
	eq(t, "unparsable", redact("postgres://u:p@h:badport/d"), "postgres://(unparsable URL)")
}

func TestDialect(t *testing.T) {
	eq(t, "sqlite", SQLite.String(), "sqlite")
	eq(t, "postgres", Postgres.String(), "postgres")
	eq(t, "zero", Dialect(0).String(), "Dialect(0)")
	eq(t, "sqlite placeholder", SQLite.Placeholder(3), "?")
	eq(t, "postgres placeholder", Postgres.Placeholder(3), "$3")
}

// Open on the PostgreSQL server of postgresEnv: the dialect, and a round trip.
func TestOpenPostgres(t *testing.T) {
	e := newPostgresEnv(t)
	eq(t, "dialect", e.db.Dialect, Postgres)
	var one int
	if err := e.db.SQL.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	eq(t, "SELECT 1", one, 1)
	if u, err := url.Parse(e.url); err == nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(e.db.String(), ":"+pw+"@") {
			t.Errorf("String() %q shows the password", e.db.String())
		}
	}
}
