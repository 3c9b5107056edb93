package builtin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// TableSpec is what a SQL sink class's spec says of its table: the table, and the
// statement that creates it ("" if none). gale.sink.SQL and gale serve's
// gale.sink.Table read it alike (ReadTable).
type TableSpec struct {
	Table  sink.Table
	Create string
}

// ReadTable reads the table properties of a SQL sink class:
//
//	table     the table (required)
//	columns   the columns, each a field of the input (required)
//	conflict  the key columns, among columns (required): a PRIMARY KEY or UNIQUE
//	mode      insert-once (default) or versioned-upsert
//	version   versioned-upsert's version column
//	create    the statement that creates the table (CREATE TABLE IF NOT EXISTS),
//	          run at every start; without it the table must exist
//
// Each error is a *component.SpecError at the property at fault.
func ReadTable(s component.Spec) (TableSpec, error) {
	if err := s.Require("table", "columns", "conflict"); err != nil {
		return TableSpec{}, err
	}
	name, err := s.String("table", "")
	if err != nil {
		return TableSpec{}, err
	}
	cols, err := s.Strings("columns", nil)
	if err != nil {
		return TableSpec{}, err
	}
	conflict, err := s.Strings("conflict", nil)
	if err != nil {
		return TableSpec{}, err
	}
	mode, err := s.String("mode", "insert-once")
	if err != nil {
		return TableSpec{}, err
	}
	version, err := s.String("version", "")
	if err != nil {
		return TableSpec{}, err
	}
	t := sink.Table{Name: name, Columns: cols, Conflict: conflict, Version: version}
	switch mode {
	case "insert-once":
		t.Mode = sink.InsertOnce
	case "versioned-upsert":
		t.Mode = sink.VersionedUpsert
	default:
		return TableSpec{}, ioPropError("mode", "want insert-once or versioned-upsert, not %q", mode)
	}
	if version != "" && t.Mode == sink.InsertOnce {
		_, given := s.Properties["mode"]
		return TableSpec{}, ioPropError("version", "a version column is for mode versioned-upsert, and mode is insert-once%s",
			map[bool]string{false: " (the default: is property mode missing or misspelt?)", true: ""}[given])
	}
	if err := t.Validate(); err != nil {
		return TableSpec{}, ioPropError(tableFault(t), "%v", err)
	}
	// A column the input lacks would fail every tuple at runtime, replayed for ever.
	if err := s.NeedInputFields("columns", cols...); err != nil {
		return TableSpec{}, err
	}
	ts := TableSpec{Table: t}
	if _, ok := s.Properties["create"]; ok {
		stmt, err := s.String("create", "")
		if err != nil {
			return TableSpec{}, err
		}
		if ts.Create, err = CheckCreate(stmt, name); err != nil {
			return TableSpec{}, ioPropError("create", "%v", err)
		}
	}
	return ts, nil
}

// tableFault is the property a table's Validate error is about: the first of
// table, columns, conflict, version that Validate would refuse.
func tableFault(t sink.Table) string {
	if err := (sink.Table{Name: t.Name, Columns: []string{"c"}, Conflict: []string{"c"}, Mode: sink.InsertOnce}).Validate(); err != nil {
		return "table"
	}
	if err := (sink.Table{Name: "t", Columns: t.Columns, Conflict: t.Columns[:min(1, len(t.Columns))], Mode: sink.InsertOnce}).Validate(); err != nil {
		return "columns"
	}
	if err := (sink.Table{Name: "t", Columns: t.Columns, Conflict: t.Conflict, Mode: sink.InsertOnce}).Validate(); err != nil {
		return "conflict"
	}
	if t.Mode == sink.InsertOnce {
		return "version"
	}
	if t.Version == "" {
		return "mode"
	}
	return "version"
}

// createTable matches the start of a statement that creates a table.
var createTable = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?("[^"]+"|[A-Za-z_][A-Za-z0-9_.]*)\s*\(`)

// CheckCreate checks that stmt is one statement creating table, as a SQL sink's
// create property must be: it runs at every start with the sink's rights, so
// another statement (a DROP after a ';') or another table is refused, not run.
// It returns stmt without a final ';'.
func CheckCreate(stmt, table string) (string, error) {
	s := strings.TrimSuffix(strings.TrimSpace(stmt), ";")
	if s == "" {
		return "", errors.New("want the statement that creates the table, not an empty string")
	}
	if strings.Contains(s, ";") {
		return "", errors.New("one statement only (it runs at every start): no ';' but a final one")
	}
	m := createTable.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("want CREATE TABLE [IF NOT EXISTS] %s (...), not %q", table, ioClip(s, 40))
	}
	if name := strings.Trim(m[2], `"`); table != "" && name != table {
		return "", fmt.Errorf("it creates table %s, but the sink writes table %s", name, table)
	}
	return s, nil
}

func ioClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TableRows is the sink.Options.Rows of a table whose columns are the input's
// fields of the same names: one row per input. An input without one of them is
// refused (failed, with the reason), naming the field and what the input has.
func TableRows(class string, t sink.Table) func(*tuple.Tuple) ([]sink.Row, error) {
	cols := t.Columns
	return func(tp *tuple.Tuple) ([]sink.Row, error) {
		vals := make([]any, len(cols))
		for i, c := range cols {
			v, ok := tp.Lookup(c)
			if !ok {
				return nil, fmt.Errorf("%s %s: the input from %s has no field %q (it has %v)", class, t.Name, tp.SourceComponent(), c, tp.Fields())
			}
			vals[i] = v
		}
		return []sink.Row{{Table: t.Name, Values: vals}}, nil
	}
}

func sqlSinkDecl() component.Declaration {
	return component.Declaration{
		Class:     SQLSinkClass,
		TickEvery: sink.DefaultBatchDelay, // a batch is written at the tick after it is BatchDelay old
		Doc:       "writes each input as one row of a SQL table (SQLite, PostgreSQL; columns = fields of the same names): insert-once or versioned upsert, acked after COMMIT",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			if err := s.Require("url", "table", "columns", "conflict"); err != nil {
				return nil, err
			}
			u, err := databaseURL(s, "url")
			if err != nil {
				return nil, err
			}
			ts, err := ReadTable(s)
			if err != nil {
				return nil, err
			}
			rows, err := s.Int("batchRows", sink.DefaultBatchRows)
			if err != nil {
				return nil, err
			}
			if rows < 1 {
				return nil, ioPropError("batchRows", "%d: want at least 1", rows)
			}
			opts := []SQLOption{WithBatchRows(rows)}
			if ts.Create != "" {
				opts = append(opts, WithCreate(ts.Create))
			}
			if cfg := ioTopologyConfig(s); !cfg.DisableTimeouts {
				opts = append(opts, WithMessageTimeout(cfg.MessageTimeout))
			}
			snk, err := NewSQLSink(u, ts.Table, opts...)
			if err != nil {
				return nil, &component.SpecError{Arg: -1, Call: -1, Msg: err.Error()}
			}
			return snk.Bolt, nil
		},
	}
}

// SQLSink is package sink's bolt for a topology whose tasks open the database
// themselves: the database URL may be a reference (env:NAME or @PATH), resolved
// in the process that runs the task, and the tasks of one process share one pool
// per URL. Each input is one row of one table, its columns the input's fields of
// the same names (TableRows); what it guarantees is sink's: acked after COMMIT,
// insert-once or versioned upsert, so a replayed input changes nothing.
//
// Declare its bolt with TickEvery(sink.DefaultBatchDelay) (the class does): a
// batch not yet full is written at the first tick after it is that old. Without
// ticks each input is written in a transaction of its own (slower, never stuck).
type SQLSink struct {
	url      string
	table    sink.Table
	create   string
	rows     int
	timeout  time.Duration
	counters *sink.Counters
}

// SQLOption configures NewSQLSink.
type SQLOption func(*SQLSink) error

// WithCreate runs stmt (one CREATE TABLE [IF NOT EXISTS] of the sink's table,
// checked by CheckCreate) when each task starts.
func WithCreate(stmt string) SQLOption {
	return func(s *SQLSink) error {
		c, err := CheckCreate(stmt, s.table.Name)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		s.create = c
		return nil
	}
}

// WithBatchRows sets sink.Options.BatchRows. Default sink.DefaultBatchRows.
func WithBatchRows(n int) SQLOption {
	return func(s *SQLSink) error {
		if n < 1 {
			return fmt.Errorf("batch rows %d: want at least 1", n)
		}
		s.rows = n
		return nil
	}
}

// WithMessageTimeout gives the topology's message timeout (sink.Options
// .MessageTimeout), from which the sink's transaction bound and retry backoff
// follow, so that a stalled database is an outage before any tree times out.
func WithMessageTimeout(d time.Duration) SQLOption {
	return func(s *SQLSink) error {
		if d < sink.MinMessageTimeout {
			return fmt.Errorf("message timeout %v: the SQL sink needs at least %v", d, sink.MinMessageTimeout)
		}
		s.timeout = d
		return nil
	}
}

// NewSQLSink returns a sink writing table at url: "postgres://...", an SQLite path
// (or sqlite:PATH), or a reference env:NAME / @PATH. A URL holding a password in
// clear is refused (sink.ErrSecretInURL): it would travel with the topology.
func NewSQLSink(url string, table sink.Table, opts ...SQLOption) (*SQLSink, error) {
	switch {
	case url == "":
		return nil, errors.New("SQL sink: empty database URL")
	case sink.HoldsSecret(url):
		return nil, fmt.Errorf("SQL sink: %w: give it by reference, env:NAME or @PATH", sink.ErrSecretInURL)
	}
	if err := checkRef("url", url); err != nil {
		return nil, err
	}
	if err := table.Validate(); err != nil {
		return nil, err
	}
	s := &SQLSink{url: url, table: table, rows: sink.DefaultBatchRows, counters: &sink.Counters{}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("SQL sink: a nil option")
		}
		if err := o(s); err != nil {
			return nil, fmt.Errorf("SQL sink: %w", err)
		}
	}
	// What sink.NewBolt checks but the database (the dialect of its statements).
	if _, err := table.Statement(sink.SQLite); err != nil {
		return nil, err
	}
	return s, nil
}

// Counters are the counts of every task of the sink (rows, duplicates, stale...).
func (s *SQLSink) Counters() *sink.Counters { return s.counters }

// Bolt returns a new task: the factory for Builder.SetBolt.
func (s *SQLSink) Bolt() topology.Bolt { return &sqlBolt{snk: s} }

type sqlBolt struct {
	snk   *SQLSink
	db    *sharedDB
	inner topology.Bolt
}

func (b *sqlBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if err := ioCheckInputs(tc, SQLSinkClass, "column", b.snk.table.Columns); err != nil {
		return err
	}
	db, err := openShared(ctx, b.snk.url)
	if err != nil {
		return fmt.Errorf("%s: %w", SQLSinkClass, err)
	}
	if b.snk.create != "" {
		if err := db.create(ctx, b.snk.create); err != nil {
			db.release()
			return fmt.Errorf("%s: create table %s: %w", SQLSinkClass, b.snk.table.Name, err)
		}
	}
	rows := b.snk.rows
	if tc.Topology != nil && tc.Topology.Component(tc.Component).TickEvery == 0 {
		// No ticks: a batch not yet full would never be written, and its trees would
		// time out and be replayed into it. Each input is then its own transaction.
		rows = 1
	}
	newBolt, err := sink.NewBolt(sink.Options{
		DB: db.db, Tables: []sink.Table{b.snk.table}, Rows: TableRows(SQLSinkClass, b.snk.table),
		BatchRows: rows, MessageTimeout: b.snk.timeout, Counters: b.snk.counters,
	})
	if err != nil {
		db.release()
		return err
	}
	b.db, b.inner = db, newBolt()
	if err := b.inner.Prepare(ctx, tc, out); err != nil {
		db.release()
		b.db = nil
		return err
	}
	return nil
}

func (b *sqlBolt) Execute(t *tuple.Tuple) { b.inner.Execute(t) }

func (b *sqlBolt) Cleanup() error {
	if b.inner == nil {
		return nil
	}
	err := b.inner.Cleanup()
	b.db.release()
	return err
}

// The tasks of one process share one pool per database URL: SQLite has one writer
// at a time (sink.Open's pool holds one connection), and a pool per task would
// only wait on another's lock.
var (
	dbsMu sync.Mutex
	dbs   = map[string]*sharedDB{}
)

type sharedDB struct {
	key  string
	db   *sink.DB
	refs int

	createMu sync.Mutex
	created  map[string]bool
}

// create runs a CREATE TABLE IF NOT EXISTS once per process and database, the
// tasks' in turn: PostgreSQL may fail one of two such statements run at once (a
// unique violation in its catalog), and a task started in another process at the
// same moment can still make this one fail, so a failure is tried again, when the
// other's table makes it a no-op.
func (d *sharedDB) create(ctx context.Context, stmt string) error {
	d.createMu.Lock()
	defer d.createMu.Unlock()
	if d.created[stmt] {
		return nil
	}
	var err error
	for range 3 {
		if _, err = d.db.SQL.ExecContext(ctx, stmt); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if d.created == nil {
		d.created = map[string]bool{}
	}
	d.created[stmt] = true
	return nil
}

func openShared(ctx context.Context, ref string) (*sharedDB, error) {
	u, err := sink.ResolveURL(ref)
	if err != nil {
		return nil, err
	}
	dbsMu.Lock()
	defer dbsMu.Unlock()
	if d := dbs[u]; d != nil {
		d.refs++
		return d, nil
	}
	db, err := sink.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	d := &sharedDB{key: u, db: db, refs: 1}
	dbs[u] = d
	return d, nil
}

func (d *sharedDB) release() {
	dbsMu.Lock()
	defer dbsMu.Unlock()
	if d.refs--; d.refs == 0 {
		delete(dbs, d.key)
		_ = d.db.Close()
	}
}
