package sink

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Defaults for the zero values of Options.
const (
	DefaultBatchRows    = 256
	DefaultBatchDelay   = 20 * time.Millisecond
	DefaultFlushTimeout = 10 * time.Second
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
	// FlushTimeout bounds one batch's transaction, from BEGIN to COMMIT; past it the
	// transaction is rolled back and the batch failed. Keep it well under the
	// topology's MessageTimeout. Default 10 s.
	FlushTimeout time.Duration
	// After, if set, runs inside each batch's transaction after every row was
	// written and before COMMIT (e.g. to recompute a summary from the rows it names).
	// rows are the batch's rows in input order. An error rolls the batch back and fails
	// it like a write error. tx must not be committed or rolled back by the hook.
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
}

// CountersSnapshot is a plain copy of Counters.
type CountersSnapshot struct {
	Batches, Rows, Duplicates, Stale, Failures, Rejected, Dropped uint64
}

// Snapshot reads every counter (each atomically, not all at one instant).
func (c *Counters) Snapshot() CountersSnapshot {
	return CountersSnapshot{
		Batches: c.Batches.Load(), Rows: c.Rows.Load(), Duplicates: c.Duplicates.Load(),
		Stale: c.Stale.Load(), Failures: c.Failures.Load(), Rejected: c.Rejected.Load(),
		Dropped: c.Dropped.Load(),
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
// transaction is rolled back, the error is reported with ReportError and
// Counters.Failures grows. Then, unless the error is the database's own (connection
// lost, deadline, closed), each input is written again in a transaction of its own:
// those that commit are acked, those that fail are failed (the spout replays them;
// the error is the fail reason given to OutputCollector.FailWith), and after three
// failures in a row with no success the rest are failed untried. So a row the
// database refuses (a CHECK or encoding error) fails only its own input. A COMMIT
// that returns an error may still have committed (a connection lost after the server
// committed); the replay then writes nothing new, which is why the sink's writes are
// idempotent.
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

	inputs []*tuple.Tuple // buffered inputs, in arrival order
	rows   []Row          // their rows, in the same order
	ends   []int          // ends[i]: rows[ends[i-1]:ends[i]] are inputs[i]'s
	oldest time.Time      // when inputs[0] was buffered
}

// Prepare implements topology.Bolt. ctx (the runtime's Start context) bounds every
// transaction along with FlushTimeout.
func (b *Bolt) Prepare(ctx context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.ctx, b.out = ctx, out
	return nil
}

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
		if len(b.inputs) > 0 && now.Sub(b.oldest) >= b.cfg.BatchDelay {
			b.flush()
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

// flush writes the buffered batch in one transaction, then acks its inputs, or fails
// them all if anything went wrong.
func (b *Bolt) flush() {
	inputs, rows, ends := b.inputs, b.rows, b.ends
	b.inputs, b.rows, b.ends = nil, nil, nil
	if len(inputs) == 0 {
		return
	}
	c := b.cfg.Counters
	res, err := b.write(rows)
	if err != nil && len(inputs) > 1 && !systemic(err) {
		// One input's rows may be refused by the database (a poison row): write each
		// input in its own transaction, so only the inputs that fail are failed, not
		// every event that shared their batch. Costs nothing unless a batch fails.
		b.isolate(inputs, rows, ends, err)
		return
	}
	if err != nil {
		c.Failures.Add(1)
		err = fmt.Errorf("sink: batch of %d inputs (%d rows) to %s rolled back, inputs failed: %w", len(inputs), len(rows), b.cfg.DB, err)
		var outErr error
		for _, t := range inputs {
			if e := b.fail(t, err); e != nil && outErr == nil {
				outErr = e
			}
		}
		b.out.ReportError(err)
		if outErr != nil {
			b.out.ReportError(fmt.Errorf("sink: failing the batch's inputs: %w", outErr))
		}
		return
	}
	c.Batches.Add(1)
	c.Rows.Add(res.written)
	c.Duplicates.Add(res.duplicates)
	c.Stale.Add(res.stale)
	var outErr error
	for _, t := range inputs {
		if e := b.out.Ack(t); e != nil && outErr == nil {
			outErr = e
		}
	}
	if outErr != nil {
		b.out.ReportError(fmt.Errorf("sink: acking a committed batch's inputs: %w", outErr))
	}
}

// isolate writes each input of a failed batch in a transaction of its own, acking
// those that commit and failing those that do not. An error of the database itself
// (systemic) stops it: the inputs not tried yet are failed without trying.
func (b *Bolt) isolate(inputs []*tuple.Tuple, rows []Row, ends []int, batchErr error) {
	c := b.cfg.Counters
	c.Failures.Add(1)
	b.out.ReportError(fmt.Errorf("sink: batch of %d inputs to %s rolled back (%w); writing them one by one", len(inputs), b.cfg.DB, batchErr))
	start := 0
	var stop error
	for i, t := range inputs {
		one := rows[start:ends[i]]
		start = ends[i]
		var err error
		var res result
		if stop == nil {
			res, err = b.write(one)
			if err != nil && systemic(err) {
				stop = err
			}
		} else {
			err = fmt.Errorf("not tried: the database failed (%w)", stop)
		}
		if err != nil {
			c.Failures.Add(1)
			_ = b.fail(t, fmt.Errorf("sink: input written alone to %s rolled back: %w", b.cfg.DB, err))
			continue
		}
		c.Batches.Add(1)
		c.Rows.Add(res.written)
		c.Duplicates.Add(res.duplicates)
		c.Stale.Add(res.stale)
		if e := b.out.Ack(t); e != nil {
			b.out.ReportError(fmt.Errorf("sink: acking a committed input: %w", e))
		}
	}
}

// systemic reports errors that no input causes alone (the database is gone or slow),
// for which writing inputs one by one would only multiply the wait.
func systemic(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.As(err, &ne) ||
		strings.Contains(err.Error(), "database is closed") ||
		strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY")
}

// fail fails t with its reason, which reaches a topology.ReasonedSpout (e.g. to keep
// it with a dead letter).
func (b *Bolt) fail(t *tuple.Tuple, reason error) error { return b.out.FailWith(t, reason) }

type result struct{ written, duplicates, stale uint64 }

// write runs one transaction: every row, the After hook, COMMIT.
func (b *Bolt) write(rows []Row) (res result, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.FlushTimeout)
	defer cancel()
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
// drop: ticks go on while Stop waits for pending trees, and write the last batch.
func (b *Bolt) Cleanup() error {
	n := len(b.inputs)
	rows := len(b.rows)
	b.inputs, b.rows = nil, nil
	if n == 0 {
		return nil
	}
	b.cfg.Counters.Dropped.Add(uint64(n))
	return fmt.Errorf("sink: %w: %d inputs (%d rows) were neither committed nor acked; the spout replays them", ErrDropped, n, rows)
}

// ErrDropped is wrapped by the error Cleanup returns when it dropped buffered inputs.
var ErrDropped = errors.New("buffered inputs dropped at cleanup")
