package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// postgresEnv names the PostgreSQL server the Postgres variants of the tests use.
const postgresEnv = "GALE_TEST_POSTGRES_URL"

// env is one test's database: a fresh SQLite file, or a fresh PostgreSQL schema.
type env struct {
	t       *testing.T
	dialect Dialect
	url     string // opens this test's database (for Postgres, with its search_path)
	db      *DB    // the sink's connection
}

// backends runs fn once per backend: SQLite always, PostgreSQL when postgresEnv is
// set (skipped, naming the variable, when it is not).
func backends(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newSQLiteEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newPostgresEnv(t))
	})
}

func newSQLiteEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dialect: SQLite, url: "sqlite:" + filepath.Join(t.TempDir(), "sink.db")}
	e.db = e.open()
	return e
}

var schemaChars = regexp.MustCompile(`[^a-z0-9]+`)

// newPostgresEnv makes a schema of its own for the test (dropped at the end) and
// points the test's URL at it with search_path.
func newPostgresEnv(t *testing.T) *env {
	t.Helper()
	base := os.Getenv(postgresEnv)
	if base == "" {
		t.Skipf("%s is not set: PostgreSQL variant skipped (CI sets it; see .ci/run)", postgresEnv)
	}
	admin := mustOpen(t, base)
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := schemaChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	name = "gale_sink_" + strings.Trim(name[:min(len(name), 40)], "_") + "_" + hex.EncodeToString(r[:])
	if _, err := admin.SQL.Exec("CREATE SCHEMA " + quoteIdent(name)); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.SQL.Exec("DROP SCHEMA " + quoteIdent(name) + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", postgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	e := &env{t: t, dialect: Postgres, url: u.String()}
	e.db = e.open()
	return e
}

func mustOpen(t *testing.T, rawURL string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := Open(ctx, rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// open opens another connection pool to the test's database, closed at the end.
func (e *env) open() *DB {
	e.t.Helper()
	db := mustOpen(e.t, e.url)
	e.t.Cleanup(func() { db.Close() })
	return db
}

func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	if _, err := e.db.SQL.Exec(query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// count returns SELECT count(*) FROM table [WHERE where].
func (e *env) count(db *DB, table, where string, args ...any) int {
	e.t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := db.SQL.QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// The tables of the tests, made by createTables in every test's database.
const (
	eventsDDL   = `CREATE TABLE events (event_id TEXT PRIMARY KEY, source TEXT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL)`
	entitiesDDL = `CREATE TABLE entities (entity_key TEXT PRIMARY KEY, version BIGINT NOT NULL, event_id TEXT NOT NULL, payload TEXT NOT NULL)`
	// amounts refuses negative amounts: a row that makes a whole batch fail.
	amountsDDL = `CREATE TABLE amounts (event_id TEXT PRIMARY KEY, amount BIGINT NOT NULL CHECK (amount >= 0))`
	summaryDDL = `CREATE TABLE summary (name TEXT PRIMARY KEY, n BIGINT NOT NULL)`
)

var (
	eventsTable = Table{Name: "events", Columns: []string{"event_id", "source", "type", "payload"},
		Conflict: []string{"event_id"}, Mode: InsertOnce}
	entitiesTable = Table{Name: "entities", Columns: []string{"entity_key", "version", "event_id", "payload"},
		Conflict: []string{"entity_key"}, Mode: VersionedUpsert, Version: "version"}
	amountsTable = Table{Name: "amounts", Columns: []string{"event_id", "amount"},
		Conflict: []string{"event_id"}, Mode: InsertOnce}
)

func (e *env) createTables() {
	e.t.Helper()
	for _, ddl := range []string{eventsDDL, entitiesDDL, amountsDDL, summaryDDL} {
		e.exec(ddl)
	}
}

// ingestSource is the stream the ingest spout emits: ("event_id", "record").
var ingestSource = &tuple.Source{Component: "ingest", Stream: tuple.DefaultStream, Fields: tuple.NewFields("event_id", "record")}

// record makes an ingest record; version < 0 means none.
func record(id, key string, version int64, payload string) *event.Record {
	ev := event.Event{ID: id, Source: "test", Type: "thing", Key: key, Payload: []byte(payload)}
	if version >= 0 {
		ev.Version = &version
	}
	return &event.Record{Event: ev, Hash: ev.Hash()}
}

func ingestTuple(r *event.Record) *tuple.Tuple {
	return tuple.New(ingestSource, 1, tuple.Values{r.Event.ID, r})
}

func tickAt(at time.Time) *tuple.Tuple { return tuple.New(tuple.TickSource, -1, tuple.Values{at}) }

// recordRows is the Rows function of the tests: every record goes to events (insert
// once by event id), a record with a version also to entities (newest version per
// key), and a payload `{"amount": N}` to amounts. A record whose type is "bad" is an
// error.
func recordRows(t *tuple.Tuple) ([]Row, error) {
	r, ok := t.ValueByField("record").(*event.Record)
	if !ok {
		return nil, fmt.Errorf("field record is %T, not *event.Record", t.ValueByField("record"))
	}
	ev := r.Event
	if ev.Type == "bad" {
		return nil, errors.New("type bad is refused")
	}
	rows := []Row{{Table: "events", Values: []any{ev.ID, ev.Source, ev.Type, string(ev.Payload)}}}
	if ev.Version != nil {
		rows = append(rows, Row{Table: "entities", Values: []any{ev.Key, *ev.Version, ev.ID, string(ev.Payload)}})
	}
	var amount int64
	if _, err := fmt.Sscanf(string(ev.Payload), `{"amount": %d}`, &amount); err == nil {
		rows = append(rows, Row{Table: "amounts", Values: []any{ev.ID, amount}})
	}
	return rows, nil
}

func (e *env) options(c *Counters) Options {
	return Options{
		DB: e.db, Tables: []Table{eventsTable, entitiesTable, amountsTable},
		Rows: recordRows, Counters: c,
	}
}

// collector is a fake OutputCollector that records acks, fails and errors, and checks
// that each input is finished once.
type collector struct {
	mu       sync.Mutex
	acked    []string // event ids, in order
	failed   []string
	reasons  []error // of each fail, nil for a plain Fail
	errs     []error
	finished map[*tuple.Tuple]string
	onAck    func(id string) // called before an ack is recorded
	resets   map[string]int  // ResetTimeout calls per event id
}

func newCollector() *collector {
	return &collector{finished: map[*tuple.Tuple]string{}, resets: map[string]int{}}
}

func (c *collector) Emit(tuple.Values, ...*tuple.Tuple) error {
	return errors.New("sink emits nothing")
}
func (c *collector) EmitTo(string, tuple.Values, ...*tuple.Tuple) error {
	return errors.New("sink emits nothing")
}
func (c *collector) EmitDirect(int, string, tuple.Values, ...*tuple.Tuple) error {
	return errors.New("sink emits nothing")
}
func (c *collector) ResetTimeout(t *tuple.Tuple) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resets[t.StringByField("event_id")]++
	return nil
}
func (c *collector) ReportError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}
func (c *collector) Ack(t *tuple.Tuple) error  { return c.finish(t, "ack", nil) }
func (c *collector) Fail(t *tuple.Tuple) error { return c.finish(t, "fail", nil) }
func (c *collector) FailWith(t *tuple.Tuple, reason error) error {
	return c.finish(t, "fail", reason)
}

func (c *collector) finish(t *tuple.Tuple, how string, reason error) error {
	id := t.StringByField("event_id")
	if how == "ack" && c.onAck != nil {
		c.onAck(id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.finished[t]; ok {
		c.errs = append(c.errs, fmt.Errorf("%s of %s after %s", how, id, prev))
		return topology.ErrMisuse
	}
	c.finished[t] = how
	if how == "ack" {
		c.acked = append(c.acked, id)
	} else {
		c.failed = append(c.failed, id)
		c.reasons = append(c.reasons, reason)
	}
	return nil
}

func (c *collector) state() (acked, failed []string, errs []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.acked...), append([]string(nil), c.failed...), append([]error(nil), c.errs...)
}

func (c *collector) failReasons() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.reasons...)
}

// newTestBolt makes and prepares one bolt task with a fake collector.
func newTestBolt(t *testing.T, opts Options) (*Bolt, *collector) {
	t.Helper()
	factory, err := NewBolt(opts)
	if err != nil {
		t.Fatal(err)
	}
	b := factory().(*Bolt)
	out := newCollector()
	if err := b.Prepare(context.Background(), topology.TaskContext{Component: "sink"}, out); err != nil {
		t.Fatal(err)
	}
	return b, out
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ---- the real runtime ----

// outcomes records what the spout is told, by message id. Safe for concurrent use.
type outcomes struct {
	mu      sync.Mutex
	acked   map[string]int
	failed  map[string]int
	reasons []string // of each fail
}

func newOutcomes() *outcomes { return &outcomes{acked: map[string]int{}, failed: map[string]int{}} }

func (o *outcomes) counts() (acks, fails int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.acked {
		acks += n
	}
	for _, n := range o.failed {
		fails += n
	}
	return acks, fails
}

func (o *outcomes) waitFor(t *testing.T, what string, cond func(acks, fails int) bool) {
	t.Helper()
	waitfor.Until(t, 20*time.Second, func() error {
		if a, f := o.counts(); !cond(a, f) {
			return fmt.Errorf("still waiting for %s: acks=%d fails=%d", what, a, f)
		}
		return nil
	})
}

// recordSpout emits its records once each, tracked with the event id as message id,
// and records acks and fails. With replay, a failed record is emitted again (same
// message id). onAck runs on the spout's goroutine before an ack is recorded.
type recordSpout struct {
	records []*event.Record
	out     *outcomes
	replay  bool
	onAck   func(id string)

	next  int
	again []*event.Record
	byID  map[string]*event.Record
	emit  topology.SpoutCollector
}

func (s *recordSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.emit = out
	s.byID = map[string]*event.Record{}
	for _, r := range s.records {
		s.byID[r.Event.ID] = r
	}
	return nil
}

func (s *recordSpout) NextTuple() {
	var r *event.Record
	switch {
	case len(s.again) > 0:
		r, s.again = s.again[0], s.again[1:]
	case s.next < len(s.records):
		r = s.records[s.next]
		s.next++
	default:
		return
	}
	if err := s.emit.Emit(tuple.Values{r.Event.ID, r}, r.Event.ID); err != nil {
		panic(err)
	}
}

func (s *recordSpout) Ack(id any) {
	if s.onAck != nil {
		s.onAck(id.(string))
	}
	s.out.mu.Lock()
	s.out.acked[id.(string)]++
	s.out.mu.Unlock()
}

func (s *recordSpout) Fail(id any) { s.FailReason(id, "") }

// FailReason implements topology.ReasonedSpout: the runtime calls it instead of Fail.
func (s *recordSpout) FailReason(id any, reason string) {
	s.out.mu.Lock()
	s.out.failed[id.(string)]++
	s.out.reasons = append(s.out.reasons, reason)
	s.out.mu.Unlock()
	if s.replay {
		s.again = append(s.again, s.byID[id.(string)])
	}
}

func (s *recordSpout) Close() error { return nil }

var _ topology.ReasonedSpout = (*recordSpout)(nil)

func quietConfig() topology.Config {
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// startTopology runs spout -> sink (declared with SetBolt, so with ticks unless
// noTicks) and stops it at the end of the test if the test did not.
func startTopology(t *testing.T, spout *recordSpout, opts Options, parallelism int, noTicks bool) *engine.Runtime {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("ingest", func() topology.Spout { return spout }, 1).Output("event_id", "record")
	if noTicks {
		factory, err := NewBolt(opts)
		if err != nil {
			t.Fatal(err)
		}
		b.SetBolt("sink", factory, parallelism).FieldsGrouping("ingest", "event_id")
	} else {
		d, err := SetBolt(b, "sink", parallelism, opts)
		if err != nil {
			t.Fatal(err)
		}
		d.FieldsGrouping("ingest", "event_id")
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return startRuntime(t, topo, quietConfig())
}

func stopTopology(t *testing.T, rt *engine.Runtime, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := rt.Stop(ctx)
	select {
	case <-rt.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("tasks still running 10 s after Stop")
	}
	return err
}
