package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
)

// Found by a breaker: a write the disk could only take part of (disk full, a
// file size limit) left that part of the line in the file; the input was failed
// and its replay appended after it, so the file held a line glued to a broken
// one. The sink now cuts the file back to where the line began. The disk is
// filled here by the process's file size limit (RLIMIT_FSIZE: a write past it
// writes what fits and fails with EFBIG; Go ignores the SIGXFSZ).
func TestFileSinkFailedWriteLeavesNoPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	snk, err := NewFileSink(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.open(); err != nil {
		t.Fatal(err)
	}
	defer snk.release()
	line := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i)), 29) + "\n") } // 30 bytes

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 100 // three lines and a third
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot set the file size limit: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	for i := range 3 {
		if err := snk.write(line(i)); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	err = snk.write(line(3))
	restore()
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("the write past the limit: %v, want EFBIG", err)
	}
	// The replay of the failed line, and the next.
	for i := 3; i < 5; i++ {
		if err := snk.write(line(i)); err != nil {
			t.Fatalf("line %d after the limit was lifted: %v", i, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 5 {
		want = append(want, line(i)...)
	}
	if string(got) != string(want) {
		t.Errorf("the file holds\n%q\nwant\n%q", got, want)
	}
}

// Found by a breaker: a file, stdout, SQL, Kafka or JetStream sink naming a field
// (fields, columns, valueField, the event id, data and header fields)
// its input stream does not have failed each tuple, and a spout without a dead
// letter replayed it for ever: a run that never ends. The start is refused
// instead, naming the field and the stream.
func TestSinksRefuseInputWithoutTheirFields(t *testing.T) {
	dir := t.TempDir()
	reg := ioRegistry(t, ioRetailLines(t, 10), 1)
	for name, c := range map[string]struct{ bolt, want string }{
		"file": {`className: gale.sink.File
    properties:
      - {name: path, value: out.jsonl}
      - {name: fields, value: [invoice, stockcode]}`,
			`gale.sink.File out: field "stockcode" is no field of stream "default" of orders (its fields [line_no, event_id, invoice, stock_code, description, quantity, price, line])`},
		"stdout": {`className: gale.sink.Stdout
    properties:
      - {name: fields, value: [qty]}`,
			`gale.sink.Stdout out: field "qty" is no field of stream "default" of orders`},
		"sql": {`className: gale.sink.SQL
    properties:
      - {name: url, value: "sqlite:` + filepath.Join(dir, "x.db") + `"}
      - {name: table, value: lines}
      - {name: columns, value: [invoice_no, line]}
      - {name: conflict, value: [invoice_no]}
      - {name: create, value: "CREATE TABLE IF NOT EXISTS lines (invoice_no TEXT PRIMARY KEY, line TEXT)"}`,
			`gale.sink.SQL out: column "invoice_no" is no field of stream "default" of orders`},
		"kafka": {`className: gale.sink.Kafka
    properties:
      - {name: brokers, value: ["127.0.0.1:1"]}
      - {name: topic, value: out}
      - {name: valueField, value: payload}`,
			`gale.sink.Kafka out: valueField "payload" is no field of stream "default" of orders`},
		"jetstream": {`className: gale.sink.JetStream
    properties:
      - {name: url, value: "nats://127.0.0.1:1"}
      - {name: subject, value: orders.out}
      - {name: dataField, value: line}
      - {name: headers, value: ["stockcode=Stock-Code"]}`,
			`gale.sink.JetStream out: field "stockcode" is no field of stream "default" of orders`},
	} {
		path := filepath.Join(dir, "topology.yaml")
		if err := os.WriteFile(path, []byte(`name: missing-fields
spouts:
  - id: orders
    className: test.Orders
bolts:
  - id: out
    `+c.bolt+`
streams:
  - {from: orders, to: out, grouping: {type: SHUFFLE}}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := flux.Load(path, flux.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// A property naming a field is refused at build where the class reads it
		// through Spec.NeedInputFields (fields, columns); the start refuses the rest,
		// and a Go value's.
		b, err := f.Build(reg)
		if err != nil {
			field := c.want[strings.Index(c.want, `"`):]
			field = field[:strings.Index(field[1:], `"`)+2]
			if !strings.Contains(err.Error(), field+` is not a field of stream "default" of "orders"`) {
				t.Errorf("%s: Build: %v\nwant it to refuse %s", name, err, field)
			}
			continue
		}
		rt, err := engine.Start(context.Background(), b.Topology, b.Config)
		if err == nil {
			_ = rt.Stop(context.Background())
			t.Errorf("%s: started, want refused: %s", name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant it to say %s", name, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); err == nil {
		t.Errorf("the refused file sink created its file")
	}
}

// A URL reference (@PATH, env:NAME) that names a directory, an empty or huge
// file, or an empty variable stops the task's start with an error naming the
// reference, never what the file holds (holds).
func TestReferencesBadTargetsStopTheStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(huge, []byte("nats://s3cr3t-token@127.0.0.1:4222 "+strings.Repeat("x", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GALE_TEST_EMPTY_URL", "")
	for ref, want := range map[string]string{
		"@" + dir:                 "is a directory",
		"@" + empty:               "the file is empty",
		"@" + huge:                "longer than 64 KiB",
		"@" + dir + "/missing":    "no such file",
		"env:GALE_TEST_EMPTY_URL": "GALE_TEST_EMPTY_URL is not set",
	} {
		_, _, err := connectNATS(ref, "", "t")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strings.TrimPrefix(strings.TrimPrefix(ref, "@"), "env:")) {
			t.Errorf("%s: %v, want an error naming it: %s", ref, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error echoes the file: %v", ref, err)
		}
		if _, err := openShared(context.Background(), ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SQL %s: %v, want %s", ref, err, want)
		}
	}
}

// CheckCreate refuses what is not one CREATE TABLE of the sink's own table, in
// the forms a file could try (holds).
func TestCheckCreateRefusesOtherStatements(t *testing.T) {
	for _, stmt := range []string{
		"CREATE TABLE t AS SELECT * FROM secrets",
		"CREATE TABLE t (a INT)\n;\nDROP TABLE u",
		"CREATE TABLE t (a INT);;",
		"CREATE TABLE t (a INT) /* ; */",
		"CREATE TABLE main.t (a INT)",
		"CREATE TEMP TABLE t (a INT)",
		"CREATE TABLE u (a INT)",
		`CREATE TABLE "t"" (a INT)`,
		"DROP TABLE t",
		"  ;  ",
		"CREATE INDEX i ON t (a)",
		"WITH x AS (SELECT 1) CREATE TABLE t (a INT)",
	} {
		if got, err := CheckCreate(stmt, "t"); err == nil {
			t.Errorf("CheckCreate(%q) = %q, want refused", stmt, got)
		}
	}
	for stmt, want := range map[string]string{
		"CREATE TABLE t (a INT);  ":               "CREATE TABLE t (a INT)",
		"create table if not exists \"t\"(a INT)": "create table if not exists \"t\"(a INT)",
		"CREATE TABLE t (a INT) WITHOUT ROWID":    "CREATE TABLE t (a INT) WITHOUT ROWID",
	} {
		if got, err := CheckCreate(stmt, "t"); err != nil || got != want {
			t.Errorf("CheckCreate(%q) = %q, %v; want %q", stmt, got, err, want)
		}
	}
}
