package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/internal/pgtest"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ioJSON is v as encoding/json writes it.
func ioJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ioFileLines reads a file's lines into a multiset.
func ioFileLines(t testing.TB, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("%s does not end with a newline", path)
	}
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		got[l]++
	}
	return got
}

func ioCheckLines(t testing.TB, what string, got, want map[string]int) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	bad := 0
	for l, n := range want {
		if got[l] != n && bad < 5 {
			t.Errorf("%s: line %q written %d times, want %d", what, l, got[l], n)
			bad++
		}
	}
	for l, n := range got {
		if want[l] == 0 && bad < 10 {
			t.Errorf("%s: line %q written %d times, not expected", what, l, n)
			bad++
		}
	}
	t.Errorf("%s: %d distinct lines, want %d", what, len(got), len(want))
}

// TestFileSinkWritesOneLinePerTuple runs test.Orders (300 retail invoice lines,
// each emitted twice: a replay) into two gale.sink.File bolts, JSON and
// tab-separated, and checks every line of both files: each tuple is one line, and
// a replayed tuple is written again (at least once, never deduped).
func TestFileSinkWritesOneLinePerTuple(t *testing.T) {
	lines := ioRetailLines(t, 300)
	dir := t.TempDir()
	b := ioBuild(t, dir, `name: file-sink
spouts:
  - id: orders
    className: test.Orders
bolts:
  - id: json
    className: gale.sink.File
    properties:
      - {name: path, value: orders.jsonl}
      - {name: fields, value: [line_no, stock_code, quantity, price, description]}
  - id: tsv
    className: gale.sink.File
    parallelism: 2
    properties:
      - {name: path, value: orders.tsv}
      - {name: format, value: tsv}
      - {name: fields, value: [invoice, quantity, line]}
      - {name: truncate, value: true}
streams:
  - {from: orders, to: json, grouping: {type: SHUFFLE}}
  - {from: orders, to: tsv, grouping: {type: SHUFFLE}}
`, ioRegistry(t, lines, 2))
	// What truncate empties: a line from before the run.
	if err := os.WriteFile(filepath.Join(dir, "orders.tsv"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ioRunToEnd(t, b)

	wantJSON, wantTSV := map[string]int{}, map[string]int{}
	for _, o := range lines {
		j := fmt.Sprintf(`{"line_no":%d,"stock_code":%s,"quantity":%d,"price":%s,"description":%s}`,
			o.lineNo, ioJSON(t, o.stockCode), o.quantity, ioJSON(t, o.price), ioJSON(t, o.description))
		wantJSON[j] += 2
		wantTSV[o.invoice+"\t"+fmt.Sprint(o.quantity)+"\t"+o.raw] += 2
	}
	ioCheckLines(t, "orders.jsonl", ioFileLines(t, filepath.Join(dir, "orders.jsonl")), wantJSON)
	ioCheckLines(t, "orders.tsv", ioFileLines(t, filepath.Join(dir, "orders.tsv")), wantTSV)
	t.Logf("%d tuples, each written twice to each file; e.g. %s", len(lines), lines[0].raw)
}

// ioBuffer is a bytes.Buffer safe for the writes of several tasks.
type ioBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *ioBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *ioBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStdoutSinkWritesOneLinePerTuple runs test.Orders into gale.sink.Stdout
// (JSON, every field) and checks standard output line by line.
func TestStdoutSinkWritesOneLinePerTuple(t *testing.T) {
	out := &ioBuffer{}
	old := ioStdout
	ioStdout = out
	t.Cleanup(func() { ioStdout = old })

	lines := ioRetailLines(t, 200)
	b := ioBuild(t, t.TempDir(), `name: ioStdout-sink
spouts:
  - {id: orders, className: test.Orders}
bolts:
  - {id: print, className: gale.sink.Stdout, parallelism: 3}
streams:
  - {from: orders, to: print, grouping: {type: SHUFFLE}}
`, ioRegistry(t, lines, 1))
	ioRunToEnd(t, b)

	want := map[string]int{}
	for _, o := range lines {
		want[fmt.Sprintf(`{"line_no":%d,"event_id":"retail-%d","invoice":%s,"stock_code":%s,"description":%s,"quantity":%d,"price":%s,"line":%s}`,
			o.lineNo, o.lineNo, ioJSON(t, o.invoice), ioJSON(t, o.stockCode), ioJSON(t, o.description), o.quantity, ioJSON(t, o.price), ioJSON(t, o.raw))]++
	}
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		got[l]++
	}
	ioCheckLines(t, "stdout", got, want)
}

// TestLineFormats checks the escapes of the tab-separated format and the JSON
// form of bytes, one tuple at a time.
func TestLineFormats(t *testing.T) {
	src := &tuple.Source{Component: "c", Stream: "default", Fields: tuple.NewFields("a", "b", "c", "d", "e")}
	tp := tuple.New(src, 1, tuple.Values{"x\ty\\z", []byte("line\none\r"), []byte{0xff, 0x00}, [2]uint64{1290, 3}, []any{"a b", int64(2)}})
	for _, c := range []struct {
		format LineFormat
		want   string
	}{
		{TabSeparated, "x\\ty\\\\z\tline\\none\\r\t\xff\x00\t[1290,3]\t[\"a b\",2]\n"},
		{JSONLines, `{"a":"x\ty\\z","b":"line\none\r","c":"/wA=","d":[1290,3],"e":["a b",2]}` + "\n"},
	} {
		s, err := NewWriterSink(&bytes.Buffer{}, WithFormat(c.format))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := s.line(&buf, tp); err != nil {
			t.Fatal(err)
		}
		if buf.String() != c.want {
			t.Errorf("%s: %q, want %q", c.format, buf.String(), c.want)
		}
	}
	s, _ := NewWriterSink(&bytes.Buffer{}, WithLineFields("a", "missing"))
	err := s.line(&bytes.Buffer{}, tp)
	if err == nil || !strings.Contains(err.Error(), `no field "missing"`) {
		t.Errorf("a missing field: %v, want an error naming it", err)
	}
}

// ioSQLTopology is test.Orders into two gale.sink.SQL bolts on the database REF
// names (env:NAME or @PATH, replaced by the test): every line once (insert-once by
// line_no), and each stock code's latest description (versioned upsert, the
// line number its version).
const ioSQLTopology = `name: sql-sink
config:
  topology.message.timeout.secs: 30
spouts:
  - {id: orders, className: test.Orders}
bolts:
  - id: lines
    className: gale.sink.SQL
    parallelism: 2
    properties:
      - {name: url, value: "REF"}
      - {name: table, value: order_lines}
      - {name: columns, value: [line_no, invoice, stock_code, quantity, price]}
      - {name: conflict, value: [line_no]}
      - name: create
        value: CREATE TABLE IF NOT EXISTS order_lines (line_no BIGINT PRIMARY KEY, invoice TEXT NOT NULL, stock_code TEXT NOT NULL, quantity BIGINT NOT NULL, price DOUBLE PRECISION NOT NULL)
  - id: stock
    className: gale.sink.SQL
    properties:
      - {name: url, value: "REF"}
      - {name: table, value: stock}
      - {name: columns, value: [stock_code, description, line_no]}
      - {name: conflict, value: [stock_code]}
      - {name: mode, value: versioned-upsert}
      - {name: version, value: line_no}
      - {name: batchRows, value: 64}
      - name: create
        value: CREATE TABLE IF NOT EXISTS stock (stock_code TEXT PRIMARY KEY, description TEXT NOT NULL, line_no BIGINT NOT NULL)
streams:
  - {from: orders, to: lines, grouping: {type: SHUFFLE}}
  - {from: orders, to: stock, grouping: {type: FIELDS, args: [stock_code]}}
`

// TestSQLSinkSQLite runs ioSQLTopology on SQLite, the database named by @PATH (a
// secret file, as Docker and Kubernetes mount them).
func TestSQLSinkSQLite(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "orders.db")
	secret := filepath.Join(dir, "db-url")
	if err := os.WriteFile(secret, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ioTestSQLSink(t, url, "@"+secret)
}

// TestSQLSinkPostgres runs ioSQLTopology on the PostgreSQL of GALE_TEST_POSTGRES_URL,
// in a schema of its own.
func TestSQLSinkPostgres(t *testing.T) {
	base := os.Getenv("GALE_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("GALE_TEST_POSTGRES_URL is not set")
	}
	url := pgtest.Schema(t, base, "builtin_io")
	t.Setenv("GALE_IO_TEST_DB", url)
	ioTestSQLSink(t, url, "env:GALE_IO_TEST_DB")
}

// ioTestSQLSink: 400 retail lines, each emitted twice (the second a replay). The
// rows equal what is computed here from the same lines: each line once, and for
// each stock code the description of its last line.
func ioTestSQLSink(t *testing.T, url, ref string) {
	lines := ioRetailLines(t, 400)
	doc := strings.ReplaceAll(ioSQLTopology, "REF", ref)
	ioRunToEnd(t, ioBuild(t, t.TempDir(), doc, ioRegistry(t, lines, 2)))

	db, err := sink.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type row struct {
		invoice, stock string
		quantity       int
		price          float64
	}
	got := map[int]row{}
	rs, err := db.SQL.Query(`SELECT line_no, invoice, stock_code, quantity, price FROM order_lines`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var n int
		var r row
		if err := rs.Scan(&n, &r.invoice, &r.stock, &r.quantity, &r.price); err != nil {
			t.Fatal(err)
		}
		got[n] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	want := map[int]row{}
	latest := map[string]string{}
	for _, o := range lines {
		want[o.lineNo] = row{o.invoice, o.stockCode, o.quantity, o.price}
		latest[o.stockCode] = o.description
	}
	if !maps.Equal(got, want) {
		t.Errorf("order_lines: %d rows, want %d (e.g. line 1: %+v, want %+v)", len(got), len(want), got[1], want[1])
	}
	gotStock := map[string]string{}
	rs, err = db.SQL.Query(`SELECT stock_code, description FROM stock`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var code, desc string
		if err := rs.Scan(&code, &desc); err != nil {
			t.Fatal(err)
		}
		gotStock[code] = desc
	}
	if !maps.Equal(gotStock, latest) {
		t.Errorf("stock: %d rows, want %d", len(gotStock), len(latest))
		for c, d := range latest {
			if gotStock[c] != d {
				t.Errorf("stock %s: %q, want %q", c, gotStock[c], d)
			}
		}
	}
	t.Logf("%d lines (each emitted twice) -> %d rows, %d stock codes", len(lines), len(got), len(gotStock))
}

// TestSQLSinkWithoutTicks: an SQLSink declared in Go without TickEvery writes each
// input at once (a batch would otherwise wait for ticks that never come): 150 lines,
// each emitted twice, are 150 rows, and the other 150 inputs are duplicates.
func TestSQLSinkWithoutTicks(t *testing.T) {
	lines := ioRetailLines(t, 150)
	url := "sqlite:" + filepath.Join(t.TempDir(), "noticks.db")
	snk, err := NewSQLSink(url, sink.Table{Name: "order_lines", Columns: []string{"line_no", "stock_code"}, Conflict: []string{"line_no"}, Mode: sink.InsertOnce},
		WithCreate("CREATE TABLE IF NOT EXISTS order_lines (line_no BIGINT PRIMARY KEY, stock_code TEXT NOT NULL)"))
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("orders", func() topology.Spout { return &ioOrdersSpout{lines: lines, times: 2} }, 1).Output(ioOrderFields...)
	b.SetBolt("store", snk.Bolt, 1).ShuffleGrouping("orders")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ioRunToEnd(t, &flux.Built{Topology: topo, Config: topology.DefaultConfig()})
	c := snk.Counters()
	if rows, dups, batches := c.Rows.Load(), c.Duplicates.Load(), c.Batches.Load(); rows != 150 || dups != 150 || batches != 300 {
		t.Errorf("%d rows, %d duplicates in %d transactions; want 150, 150 in 300", rows, dups, batches)
	}
}
