package sink

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Defaults for the zero values of Options.
const (
	DefaultBatchRows    = 256
	DefaultBatchDelay   = 20 * time.Millisecond
	DefaultFlushTimeout = 10 * time.Second
	DefaultRetryMin     = 100 * time.Millisecond
	DefaultRetryMax     = 5 * time.Second
	// MinMessageTimeout is the shortest Options.MessageTimeout the sink takes: a
	// third of it bounds each transaction, and a commit that reaches the disk
	// needs some time.
	MinMessageTimeout = 300 * time.Millisecond
)

// Row is one row for one of the sink's tables: Values in that Table's Columns order.
// A value is anything the driver binds (string, []byte, int64, float64, bool,
// time.Time, nil, or a driver.Valuer).
type Row struct {
	Table  string
	Values []any
}

// Options configure a sink bolt. DB, Tables and Rows are required.
type Options struct {
	// DB is where the rows go (see Open). The sink does not close it.
	DB *DB
	// Tables are the tables rows may name; each is validated (see Table.Validate).
	Tables []Table
	// Rows turns one input tuple into the rows to write (zero or more). An error fails
	// that input alone (the spout decides whether to replay it; the error is the fail
	// reason, see OutputCollector.FailWith), is reported with ReportError and
	// counted in Counters.Rejected; a row naming an unknown table, with the wrong
	// number of values, or with a nil version value is treated the same. Rows is
	// called on the task's goroutine; a panic in it is recovered by the runtime, which
	// fails that input.
	Rows func(t *tuple.Tuple) ([]Row, error)
	// BatchRows is how many rows a batch holds before it is written at once, whatever
	// its age. An input whose rows reach it is in the batch it completes. Default 256.
	BatchRows int
	// BatchDelay is how long the oldest buffered input may wait before its batch is
	// written, checked on tick tuples: declare the bolt with TickEvery(BatchDelay), or
	// use SetBolt, which does. An input then waits at most about two BatchDelays.
	// Without ticks a batch is written only when it is full. Default 20 ms.
	BatchDelay time.Duration
	// FlushTimeout bounds one batch's transaction, from BEGIN to COMMIT (a wait
	// for a lock included); past it the transaction is rolled back and, as the
	// database is too slow, the batch is held and retried like any sink-wide error.
	// It must be well under the topology's MessageTimeout, or a stalled database
	// times trees out (and charges them) before it counts as an outage. Default
	// 10 s, or a third of MessageTimeout if that is less.
	FlushTimeout time.Duration
	// RetryMin and RetryMax set the backoff of a batch held because the database
	// failed as a whole (see NewBolt): the first retry comes RetryMin after the
	// failure (checked on ticks), each later one twice as long after the one before,
	// up to RetryMax. RetryMax must be under the topology's MessageTimeout: each
	// retry restarts the held inputs' message timeouts. Defaults 100 ms and 5 s
	// (or a third of MessageTimeout if that is less).
	RetryMin, RetryMax time.Duration
	// MessageTimeout is the topology's (topology.Config.MessageTimeout). If set,
	// the sink's waits are derived from it: FlushTimeout and RetryMax default to at
	// most a third of it, and values at or above it are refused, so a stalled
	// database is an outage before any tree times out. At least
	// MinMessageTimeout. 0: the fixed defaults.
	MessageTimeout time.Duration
	// GiveUpAfter, if set, bounds an outage for a run no one repairs the database
	// during (gale sink rebuild): once the database has failed as a whole for that
	// long (from the first failure, checked at each retry), the task stops
	// retrying, keeps holding its inputs (neither acked nor failed: the events are
	// not at fault) and tells the Health, whose GaveUp channel closes so the caller
	// ends the run with the database's error. 0 (gale serve): retry until the
	// database takes the writes again.
	GiveUpAfter time.Duration
	// Health, if set, is told when the database stops and starts taking this bolt's
	// writes (share it with whoever must know, e.g. the ingest service's
	// Config.Sink, and with every sink bolt writing to the same database). Default:
	// one of the bolt's own (Bolt.Health).
	Health *Health
	// After, if set, runs inside each batch's transaction after every row was
	// written and before COMMIT (e.g. to recompute a summary from the rows it names).
	// rows are the batch's rows in input order. An error rolls the batch back and is
	// handled like a write error (held and retried if sink-wide, see NewBolt). tx
	// must not be committed or rolled back by the hook.
	After func(ctx context.Context, tx *sql.Tx, d Dialect, rows []Row) error
	// Counters, if set, receives the bolt's counts (shared by every task of the bolt,
	// and by several bolts if given to each).
	Counters *Counters
}

// Counters count what sink bolts did; every field is safe to read at any time. Counts
// of rows come from committed transactions only: a batch rolled back adds nothing but
// its Failure.
type Counters struct {
	// Batches is the number of transactions committed.
	Batches atomic.Uint64
	// Rows is the number of rows inserted or updated (affected) by committed batches.
	Rows atomic.Uint64
	// Duplicates is the number of InsertOnce rows that affected nothing: their key was
	// stored already (a replay, a retry, or a repeated event id).
	Duplicates atomic.Uint64
	// Stale is the number of VersionedUpsert rows not applied because the stored
	// version was equal or newer (out-of-order arrival, or a replay).
	Stale atomic.Uint64
	// Failures is the number of transactions rolled back: batches, and inputs written
	// alone after their batch was.
	Failures atomic.Uint64
	// Rejected is the number of inputs failed alone because Rows returned an error or
	// an invalid row.
	Rejected atomic.Uint64
	// Dropped is the number of inputs still buffered when Cleanup ran: not written,
	// not acked, not failed (see the bolt's Cleanup).
	Dropped atomic.Uint64
	// Outages is the number of times a task found the database failing as a whole
	// (full, read-only, damaged, unreachable...) after its last write that worked:
	// from then on it holds its inputs and retries.
	Outages atomic.Uint64
	// Retries is the number of transactions that wrote held inputs again after such
	// a failure (each also counted in Failures when rolled back, in Batches when
	// committed).
	Retries atomic.Uint64
}

// CountersSnapshot is a plain copy of Counters.
type CountersSnapshot struct {
	Batches, Rows, Duplicates, Stale, Failures, Rejected, Dropped, Outages, Retries uint64
}

// Snapshot reads every counter (each atomically, not all at one instant).
func (c *Counters) Snapshot() CountersSnapshot {
	return CountersSnapshot{
		Batches: c.Batches.Load(), Rows: c.Rows.Load(), Duplicates: c.Duplicates.Load(),
		Stale: c.Stale.Load(), Failures: c.Failures.Load(), Rejected: c.Rejected.Load(),
		Dropped: c.Dropped.Load(), Outages: c.Outages.Load(), Retries: c.Retries.Load(),
	}
}

// table is a validated Table with its statement for the DB's dialect.
type table struct {
	Table
	stmt     string
	index    int   // position in Options.Tables: the order tables are written in
	conflict []int // indexes of the Conflict columns in Columns
	version  int   // index of the version column, -1 for InsertOnce
}

// config is validated Options shared by the tasks of a bolt.
type config struct {
	Options
	tables map[string]*table
}

// NewBolt validates opts and returns the factory of sink bolt tasks, for
// topology.Builder.SetBolt (or use SetBolt, which also declares the ticks).
//
// Each task buffers its inputs and their rows. It writes the buffer as one batch when
// it holds BatchRows rows, or on a tick tuple once the oldest buffered input is
// BatchDelay old. A batch is one transaction: each row is executed with its table's
// prepared statement, in an order that keeps parallel tasks from deadlocking on each
// other's row locks (see lockOrder), then the After hook runs, then COMMIT.
//
// Only after COMMIT returns nil are the batch's inputs acked, so a completed tuple
// tree means its rows are committed (durably, for SQLite with the settings Open
// applies). If anything fails (BEGIN, a row, the hook, COMMIT, or FlushTimeout) the
// transaction is rolled back and Counters.Failures grows. What follows depends on
// whose fault the error is:
//
//   - The database's as a whole (a sink outage): disk full, read-only, a damaged
//     database file, I/O errors, locks held too long, connections refused or lost,
//     PostgreSQL shutting down or starting, too many connections, FlushTimeout
//     passed, a SQLite file deleted or replaced since Open (ErrFileGone)
//     (SQLite result codes FULL, IOERR, READONLY, CORRUPT, NOTADB, BUSY...;
//     SQLSTATE classes 08, 53, 57, 58, XX...; network errors). No input is failed:
//     the task holds them all, with the inputs that arrive meanwhile, restarts their
//     message timeouts (OutputCollector.ResetTimeout) and writes them again on a
//     tick after a backoff (RetryMin doubling up to RetryMax), in transactions of
//     up to BatchRows rows, until one commits. Options.Health is told at the first
//     failure and at the first commit after it; the error is reported once
//     (ReportError), not once per retry.
//   - One input's (a CHECK or NOT NULL constraint, a value the database refuses):
//     each input is written again in a transaction of its own: those that commit
//     are acked, those that fail are failed (the spout replays them; the error is
//     the fail reason given to OutputCollector.FailWith), so only the input that
//     carries the bad row counts toward its dead letter. An error the bolt cannot
//     place is treated so (that is how an input proves it is not the cause).
//
// A COMMIT that returns an error may still have committed (a connection lost after
// the server committed); the retry then writes nothing new, which is why the sink's
// writes are idempotent.
//
// A stop is nobody's fault either: when the context given to Prepare is done, the
// held inputs are neither written, acked nor failed (a write it interrupts counts as
// no error); Cleanup drops them and the spout replays them.
//
// Writing is synchronous, on the task's goroutine: while a batch is written the task
// takes no input, which is the topology's backpressure. Cleanup writes nothing: see
// Bolt.Cleanup.
func NewBolt(opts Options) (func() topology.Bolt, error) {
	cfg, err := compile(opts)
	if err != nil {
		return nil, err
	}
	return func() topology.Bolt { return &Bolt{cfg: cfg} }, nil
}

// SetBolt adds a sink bolt to b under id with parallelism tasks and declares its
// ticks (TickEvery of the effective BatchDelay). Subscribe it to its input on the
// returned Declarer, e.g. SetBolt(b, "sink", 1, opts) then .ShuffleGrouping("ingest").
func SetBolt(b *topology.Builder, id string, parallelism int, opts Options) (*topology.Declarer, error) {
	factory, err := NewBolt(opts)
	if err != nil {
		return nil, err
	}
	delay := opts.BatchDelay
	if delay == 0 {
		delay = DefaultBatchDelay
	}
	return b.SetBolt(id, factory, parallelism).TickEvery(delay), nil
}

func compile(opts Options) (*config, error) {
	bad := func(format string, args ...any) (*config, error) {
		return nil, fmt.Errorf("sink: options: "+format, args...)
	}
	switch {
	case opts.DB == nil || opts.DB.SQL == nil:
		return bad("no DB (use sink.Open)")
	case opts.Rows == nil:
		return bad("no Rows function")
	case len(opts.Tables) == 0:
		return bad("no tables")
	case opts.BatchRows < 0:
		return bad("BatchRows %d is negative", opts.BatchRows)
	case opts.BatchDelay < 0:
		return bad("BatchDelay %v is negative", opts.BatchDelay)
	case opts.FlushTimeout < 0:
		return bad("FlushTimeout %v is negative", opts.FlushTimeout)
	case opts.MessageTimeout < 0 || (opts.MessageTimeout > 0 && opts.MessageTimeout < MinMessageTimeout):
		return bad("MessageTimeout %v is below %v: a third of it bounds each transaction, too short for a commit", opts.MessageTimeout, MinMessageTimeout)
	case opts.MessageTimeout > 0 && opts.FlushTimeout >= opts.MessageTimeout:
		return bad("FlushTimeout %v is not under MessageTimeout %v: a stalled database would time trees out before it is an outage", opts.FlushTimeout, opts.MessageTimeout)
	case opts.MessageTimeout > 0 && opts.RetryMax >= opts.MessageTimeout:
		return bad("RetryMax %v is not under MessageTimeout %v: held trees would time out between retries", opts.RetryMax, opts.MessageTimeout)
	case opts.GiveUpAfter < 0:
		return bad("GiveUpAfter %v is negative", opts.GiveUpAfter)
	case opts.RetryMin < 0 || opts.RetryMax < 0:
		return bad("RetryMin %v or RetryMax %v is negative", opts.RetryMin, opts.RetryMax)
	case opts.RetryMax > 0 && opts.RetryMin > opts.RetryMax:
		return bad("RetryMin %v is above RetryMax %v", opts.RetryMin, opts.RetryMax)
	}
	if mt := opts.MessageTimeout; mt > 0 {
		if opts.FlushTimeout == 0 {
			opts.FlushTimeout = min(DefaultFlushTimeout, mt/3)
		}
		if opts.RetryMax == 0 {
			opts.RetryMax = max(min(DefaultRetryMax, mt/3), opts.RetryMin)
		}
	}
	if opts.RetryMin == 0 {
		opts.RetryMin = min(DefaultRetryMin, cmp.Or(opts.RetryMax, DefaultRetryMin))
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryMin)
	}
	if opts.Health == nil {
		opts.Health = NewHealth(nil)
	}
	if opts.BatchRows == 0 {
		opts.BatchRows = DefaultBatchRows
	}
	if opts.BatchDelay == 0 {
		opts.BatchDelay = DefaultBatchDelay
	}
	if opts.FlushTimeout == 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	if opts.Counters == nil {
		opts.Counters = &Counters{}
	}
	cfg := &config{Options: opts, tables: map[string]*table{}}
	for _, t := range opts.Tables {
		stmt, err := t.Statement(opts.DB.Dialect)
		if err != nil {
			return nil, err
		}
		if cfg.tables[t.Name] != nil {
			return bad("table %q listed twice", t.Name)
		}
		tb := &table{Table: t, stmt: stmt, index: len(cfg.tables), version: slices.Index(t.Columns, t.Version)}
		if t.Mode != VersionedUpsert {
			tb.version = -1
		}
		for _, c := range t.Conflict {
			tb.conflict = append(tb.conflict, slices.Index(t.Columns, c))
		}
		cfg.tables[t.Name] = tb
	}
	return cfg, nil
}

// Bolt is one task of a sink (see NewBolt). Its methods are called by the runtime.
type Bolt struct {
	cfg *config
	ctx context.Context
	out topology.OutputCollector

	task int // TaskContext.TaskID, this task's key in the Health

	inputs []*tuple.Tuple // buffered inputs, in arrival order
	rows   []Row          // their rows, in the same order
	ends   []int          // ends[i]: rows[ends[i-1]:ends[i]] are inputs[i]'s
	oldest time.Time      // when inputs[0] was buffered

	// outage is the sink-wide error of the last write while the buffer is held
	// because of it (nil otherwise); retryAt is when to write it again and backoff
	// the wait before that.
	outage  error
	retryAt time.Time
	backoff time.Duration
	// outageSince is when the outage began; gaveUp is set once it outlasted
	// GiveUpAfter: the task then writes nothing more.
	outageSince time.Time
	gaveUp      bool
}

// Prepare implements topology.Bolt. ctx (the runtime's Start context) bounds every
// transaction along with FlushTimeout; once it is done the bolt writes nothing (a
// stop).
func (b *Bolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.ctx, b.out, b.task = ctx, out, tc.TaskID
	return nil
}

// Health is what the bolt reports its database's availability to (Options.Health,
// or the bolt's own).
func (b *Bolt) Health() *Health { return b.cfg.Health }

// Execute implements topology.Bolt: it buffers an input's rows and writes the batch
// when it is full; on a tick it writes the batch if its oldest input is BatchDelay
// old.
func (b *Bolt) Execute(t *tuple.Tuple) {
	if t.IsTick() {
		// The later of now and the tick's time: a tick that waited behind a slow batch
		// carries an old time, and a test may send one from the future.
		now := time.Now()
		if v, ok := t.Lookup("time"); ok {
			if tt, ok := v.(time.Time); ok && tt.After(now) {
				now = tt
			}
		}
		if b.outage != nil || (len(b.inputs) > 0 && now.Sub(b.oldest) >= b.cfg.BatchDelay) {
			b.flushAt(now)
		}
		return
	}
	rows, err := b.cfg.Rows(t)
	if err == nil {
		err = b.check(rows)
	}
	if err != nil {
		b.cfg.Counters.Rejected.Add(1)
		err = fmt.Errorf("sink: input refused: %w", err)
		b.out.ReportError(fmt.Errorf("%w (input %v)", err, t))
		_ = b.fail(t, err)
		return
	}
	if len(b.inputs) == 0 {
		b.oldest = time.Now()
	}
	b.inputs = append(b.inputs, t)
	b.rows = append(b.rows, rows...)
	b.ends = append(b.ends, len(b.rows))
	if len(b.rows) >= b.cfg.BatchRows {
		b.flush()
	}
}

// check refuses rows the batch could not execute: an unknown table, a wrong number of
// values, a nil version.
func (b *Bolt) check(rows []Row) error {
	for i, r := range rows {
		tb := b.cfg.tables[r.Table]
		switch {
		case tb == nil:
			return fmt.Errorf("row %d: unknown table %q", i, r.Table)
		case len(r.Values) != len(tb.Columns):
			return fmt.Errorf("row %d for table %q: %d values for %d columns %v", i, r.Table, len(r.Values), len(tb.Columns), tb.Columns)
		case tb.version >= 0 && r.Values[tb.version] == nil:
			return fmt.Errorf("row %d for table %q: version column %q is nil", i, r.Table, tb.Version)
		}
	}
	return nil
}

// Pending returns the number of inputs and rows buffered, not yet written.
func (b *Bolt) Pending() (inputs, rows int) { return len(b.inputs), len(b.rows) }

// flush writes the held inputs, in transactions of up to BatchRows rows (one batch,
// unless an outage let them pile up), acking each transaction's inputs after its
// COMMIT. It stops at a sink-wide error, holding what is left for a retry; during
// an outage it writes only once the retry is due (so callers may call it as often
// as they like); and it writes nothing once the bolt's context is done (a stop).
func (b *Bolt) flush() { b.flushAt(time.Now()) }

// flushAt is flush at time now (a tick's).
func (b *Bolt) flushAt(now time.Time) {
	if b.gaveUp || (b.outage != nil && now.Before(b.retryAt)) {
		return
	}
	for len(b.inputs) > 0 && b.ctx.Err() == nil {
		// Inputs in the next transaction: whole inputs, up to the one whose rows reach
		// BatchRows (as a batch is made in Execute).
		n := 1
		for n < len(b.inputs) && b.ends[n-1] < b.cfg.BatchRows {
			n++
		}
		if !b.writeInputs(n, false) {
			return
		}
	}
}

// writeInputs writes the first n held inputs in one transaction and lets go of
// them: acked after COMMIT, or, when the database refused a row, written one by one
// (alone: failed with the error). It returns false, holding them, when the error is
// the database's as a whole or a stop interrupted the write.
func (b *Bolt) writeInputs(n int, alone bool) bool {
	c := b.cfg.Counters
	rows := b.rows[:b.ends[n-1]]
	if b.outage != nil {
		c.Retries.Add(1)
	}
	res, err := b.write(rows)
	switch {
	case err == nil:
		b.available()
		c.Batches.Add(1)
		c.Rows.Add(res.written)
		c.Duplicates.Add(res.duplicates)
		c.Stale.Add(res.stale)
		var outErr error
		for _, t := range b.inputs[:n] {
			if e := b.out.Ack(t); e != nil && outErr == nil {
				outErr = e
			}
		}
		if outErr != nil {
			b.out.ReportError(fmt.Errorf("sink: acking a committed batch's inputs: %w", outErr))
		}
		b.release(n)
		return true
	case b.ctx.Err() != nil:
		// A stop, not a failure of the batch: the inputs stay held, neither acked nor
		// failed (Cleanup drops them; the spout replays them).
		return false
	case sinkWide(err):
		c.Failures.Add(1)
		b.unavailable(err, len(rows))
		return false
	}
	// The database answered, and refused something the inputs carry.
	b.available()
	c.Failures.Add(1)
	if alone {
		if e := b.fail(b.inputs[0], fmt.Errorf("sink: input written alone to %s rolled back: %w", b.cfg.DB, err)); e != nil {
			b.out.ReportError(fmt.Errorf("sink: failing an input: %w", e))
		}
		b.release(1)
		return true
	}
	if n == 1 {
		err = fmt.Errorf("sink: batch of 1 input (%d rows) to %s rolled back, input failed: %w", len(rows), b.cfg.DB, err)
		b.out.ReportError(err)
		if e := b.fail(b.inputs[0], err); e != nil {
			b.out.ReportError(fmt.Errorf("sink: failing an input: %w", e))
		}
		b.release(1)
		return true
	}
	// One input's rows may be refused by the database (a poison row): write each
	// input in its own transaction, so only the inputs that fail are failed, not
	// every event that shared their batch. Costs nothing unless a batch fails.
	b.out.ReportError(fmt.Errorf("sink: batch of %d inputs to %s rolled back (%w); writing them one by one", n, b.cfg.DB, err))
	for range n {
		if !b.writeInputs(1, true) {
			return false
		}
	}
	return true
}

// release lets go of the first n held inputs (acked or failed).
func (b *Bolt) release(n int) {
	cut := b.ends[n-1]
	b.inputs = slices.Delete(b.inputs, 0, n)
	b.rows = slices.Delete(b.rows, 0, cut)
	b.ends = slices.Delete(b.ends, 0, n)
	for i := range b.ends {
		b.ends[i] -= cut
	}
	if len(b.inputs) == 0 {
		b.inputs, b.rows, b.ends = nil, nil, nil
	}
}

// unavailable holds the buffer after a sink-wide error: it schedules the next
// retry, restarts the held trees' message timeouts and, at the first failure of an
// outage, reports it (once) and tells the Health.
func (b *Bolt) unavailable(err error, rows int) {
	now := time.Now()
	if b.outage == nil {
		b.cfg.Counters.Outages.Add(1)
		b.outageSince = now
		b.backoff = b.cfg.RetryMin
		b.out.ReportError(fmt.Errorf("sink: %s fails as a whole, not because of the inputs: holding %d inputs and retrying every %v to %v (a transaction of %d rows rolled back: %w)",
			b.cfg.DB, len(b.inputs), b.cfg.RetryMin, b.cfg.RetryMax, rows, err))
	} else {
		b.backoff = min(2*b.backoff, b.cfg.RetryMax)
	}
	b.outage = err
	b.retryAt = now.Add(b.backoff)
	b.cfg.Health.report(b.task, err, b.cfg.DB)
	if g := b.cfg.GiveUpAfter; g > 0 && now.Sub(b.outageSince) >= g {
		// No one repairs the database during this run: stop retrying, and let the
		// caller end the run. The held inputs are not failed: not their fault.
		b.gaveUp = true
		err = fmt.Errorf("%s failed as a whole for %v (GiveUpAfter %v), holding %d inputs: %w",
			b.cfg.DB, now.Sub(b.outageSince).Round(time.Millisecond), g, len(b.inputs), err)
		b.out.ReportError(fmt.Errorf("sink: giving up: %w", err))
		b.cfg.Health.giveUp(err)
		return
	}
	// The wait is the database's, not the trees': keep them from timing out (a
	// tree that does time out is replayed later, and written once).
	for _, t := range b.inputs {
		// Held inputs are pending, so this fails only in a stopped task, which is
		// past keeping anything alive.
		_ = b.out.ResetTimeout(t)
	}
}

// available ends an outage at the first write the database answered.
func (b *Bolt) available() {
	if b.outage == nil {
		return
	}
	b.outage, b.backoff = nil, 0
	b.cfg.Health.report(b.task, nil, b.cfg.DB)
}

// sinkWide reports errors that belong to the database as a whole, not to the rows
// of any input: the sink is out (full, read-only, damaged, unreachable, shutting
// down, overloaded) or too slow. Writing inputs one by one would only multiply the
// wait, and failing them would charge events for what they did not do.
func sinkWide(err error) bool {
	if errors.Is(err, ErrFileGone) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG,
			sqlite3.SQLITE_RANGE, sqlite3.SQLITE_FORMAT:
			return false // the row's values
		case sqlite3.SQLITE_ERROR:
			// Mostly SQL the database refuses; a schema gone or not the sink's own
			// (a table of that name with other columns) is not a row's fault.
			msg := se.Error()
			return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") ||
				strings.Contains(msg, "has no column named")
		}
		// FULL, IOERR, READONLY, CORRUPT, NOTADB, BUSY, LOCKED, CANTOPEN, NOMEM,
		// PERM, INTERRUPT (FlushTimeout), PROTOCOL, SCHEMA...: the database's.
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if len(pe.Code) < 2 {
			return false
		}
		switch pe.Code[:2] {
		case "08", // connection exception
			"25", // invalid transaction state (25006: read-only transaction, a standby)
			"28", // invalid authorization
			"3D", // invalid catalog name (the database is gone)
			"40", // transaction rollback (serialization failure, deadlock): try again
			"42", // syntax or access rule (a table gone, a privilege revoked)
			"53", // insufficient resources (disk full, out of memory, too many connections)
			"55", // object not in prerequisite state (lock not available)
			"57", // operator intervention (shutdown, starting up, statement timeout)
			"58", // system error (I/O)
			"XX": // internal error (data or index corrupted)
			return true
		}
		return false // 22 data exception, 23 integrity constraint, 54 too big...
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) || errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "database is closed") // database/sql's, unexported
}

// fail fails t with its reason, which reaches a topology.ReasonedSpout (e.g. to keep
// it with a dead letter).
func (b *Bolt) fail(t *tuple.Tuple, reason error) error { return b.out.FailWith(t, reason) }

type result struct{ written, duplicates, stale uint64 }

// write runs one transaction: every row, the After hook, COMMIT.
func (b *Bolt) write(rows []Row) (res result, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.FlushTimeout)
	defer cancel()
	defer func() {
		if err != nil && b.ctx.Err() == nil && ctx.Err() != nil {
			err = fmt.Errorf("transaction not done within FlushTimeout %v (a lock held too long, or the database too slow): %w", b.cfg.FlushTimeout, err)
		}
	}()
	if err := b.cfg.DB.checkFile(); err != nil {
		return res, err
	}
	tx, err := b.cfg.DB.SQL.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			// The server drops an unfinished transaction with its connection anyway,
			// so a failing rollback changes nothing for the batch.
			_ = tx.Rollback()
		}
	}()
	stmts := map[string]*sql.Stmt{} // closed with the transaction
	for _, i := range b.lockOrder(rows) {
		r := rows[i]
		tb := b.cfg.tables[r.Table]
		st := stmts[r.Table]
		if st == nil {
			if st, err = tx.PrepareContext(ctx, tb.stmt); err != nil {
				return res, fmt.Errorf("prepare %s: %w", tb.stmt, err)
			}
			stmts[r.Table] = st
		}
		sr, err := st.ExecContext(ctx, r.Values...)
		if err != nil {
			return res, fmt.Errorf("row %d of the batch, table %q: %w", i, r.Table, err)
		}
		n, err := sr.RowsAffected()
		if err != nil {
			return res, fmt.Errorf("row %d of the batch, table %q: rows affected: %w", i, r.Table, err)
		}
		switch {
		case n > 0:
			res.written += uint64(n)
		case tb.Mode == InsertOnce:
			res.duplicates++
		default:
			res.stale++
		}
	}
	if h := b.cfg.After; h != nil {
		if err := h(ctx, tx, b.cfg.DB.Dialect, rows); err != nil {
			return res, fmt.Errorf("After hook: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("commit: %w", err)
	}
	committed = true
	// Gone during the transaction: the rows are in a file no one reads, so they
	// are not acked (held, and written again where the file is restored).
	if err := b.cfg.DB.checkFile(); err != nil {
		return result{}, fmt.Errorf("after commit: %w", err)
	}
	return res, nil
}

// lockOrder returns the indexes of rows in the order to execute them: by table (as
// listed in Options.Tables), then by conflict key, rows with equal keys in input
// order (so the first of two InsertOnce rows with one key is the one kept). Every
// transaction of every task then locks the rows it writes in one global order, so
// tasks writing the same keys in parallel wait for each other instead of
// deadlocking (PostgreSQL detects the cycle and aborts one transaction: "deadlock
// detected", SQLSTATE 40P01). The order of keys is that of their text form, not
// the database's collation: any order works, as long as every task uses the same.
func (b *Bolt) lockOrder(rows []Row) []int {
	order := make([]int, len(rows))
	keys := make([]string, len(rows))
	var sb strings.Builder
	for i, r := range rows {
		order[i] = i
		sb.Reset()
		for _, c := range b.cfg.tables[r.Table].conflict {
			keyText(&sb, r.Values[c])
			sb.WriteByte(0)
		}
		keys[i] = sb.String()
	}
	slices.SortStableFunc(order, func(x, y int) int {
		if c := cmp.Compare(b.cfg.tables[rows[x].Table].index, b.cfg.tables[rows[y].Table].index); c != 0 {
			return c
		}
		return strings.Compare(keys[x], keys[y])
	})
	return order
}

// keyText writes a text form of a key value that is the same in every process.
func keyText(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		sb.WriteString(v)
	case []byte:
		sb.Write(v)
	case time.Time:
		sb.WriteString(v.UTC().Format(time.RFC3339Nano)) // no monotonic clock reading
	default:
		fmt.Fprint(sb, v)
	}
}

// Cleanup implements topology.Bolt. It writes nothing and acks nothing: when the
// runtime calls Cleanup the task is stopped and its collector refuses Ack and Fail
// (runtime's bolt stop marks the task stopped before Cleanup), so a batch committed
// here could never be acked, and the spout would replay it anyway. The inputs still
// buffered are dropped uncommitted: their trees are already counted Abandoned by the
// runtime (or time out), and a spout with a durable log replays them on its next run.
// It counts them in Counters.Dropped and returns an error naming how many (the runtime
// reports it). With TickEvery declared, a graceful runtime.Stop leaves nothing to
// drop unless the database is unavailable: ticks go on while Stop waits for pending
// trees, and write the last batch; inputs held by an outage that outlasts Stop's
// deadline are dropped (and replayed at the next run).
func (b *Bolt) Cleanup() error {
	n := len(b.inputs)
	rows := len(b.rows)
	b.inputs, b.rows, b.ends = nil, nil, nil
	if n == 0 {
		return nil
	}
	b.cfg.Counters.Dropped.Add(uint64(n))
	return fmt.Errorf("sink: %w: %d inputs (%d rows) were neither committed nor acked; the spout replays them", ErrDropped, n, rows)
}

// ErrDropped is wrapped by the error Cleanup returns when it dropped buffered inputs.
var ErrDropped = errors.New("buffered inputs dropped at cleanup")
