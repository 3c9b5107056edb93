// Package orders is gale's order pipeline on real data: the invoice lines of the UCI
// Online Retail dataset (testdata/retail), checked for risk and stock in parallel,
// joined into one decision per line, and written idempotently to SQL.
//
//	spout --shuffle--> parse --shuffle------------> risk  --fields(event_id)--> decision --fields(invoice_no)--> sink
//	                         \--fields(stock_code)-> stock --fields(event_id)--/
//
// The spout is the caller's (the ingest log's, or a test's): it emits tracked tuples
// with the fields ingest.SpoutFields, the parts of a log record whose payload is an
// order line (see ReadCSV and ingest.SpoutValues). parse decodes it; risk flags it
// (Assess); stock reserves or returns units (Stock, idempotent per event id); decision
// joins the two halves of each line and emits one tuple anchored to both (seed 000
// §3.2: if either branch fails, the event is replayed); the sink writes the line once per event id to order_lines and
// keeps invoice_summary current in the same transaction (see Schema, OrderLinesTable
// and SummaryTable).
//
// Delivery is at least once, the effects are not repeated: a replayed event gets its
// first stock verdict back, its order_lines row is inserted once, and invoice_summary is
// recomputed from order_lines with a version that only grows. So order_lines holds one
// row per event and invoice_summary the true line counts and totals however often
// events were replayed. Which sales find their stock short depends on the order in
// which lines reach the stock tasks (parse has several tasks, and a replay comes
// late), as it would in any live shop; it never depends on a line being counted twice.
//
// Tuples carry only plain values (strings and integers, which the tuple codec encodes
// without registration), so that the tasks could run in separate processes:
//
//	parse:     LineFields (the order line, one field per column)
//	risk:      LineFields, flags (uint8: Flags)
//	stock:     event_id, stock (string: the verdict), stock_level (int64)
//	decision:  DecisionFields (LineFields, flags, stock, stock_level, decision)
//
// Each task keeps its state in its own bolt (stock levels and verdicts per stock task,
// held join halves per decision task). The pipeline's outcome is handed off in one
// place, the sink's database, as it would be in a multi-process run.
package orders

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Component ids of the topology.
const (
	SpoutID    = "events"
	ParseID    = "parse"
	RiskID     = "risk"
	StockID    = "stock"
	DecisionID = "decision"
	SinkID     = "sink"
)

// Defaults of DefaultOptions.
const (
	// DefaultLargeAmount flags lines above £500. In testdata/retail (7,419 lines, three
	// days) the 99th percentile of |quantity × price| is £195 to £243 per day; 28
	// lines (0.38%) are above £500, wholesale lines such as 480 photo frames at £3.39
	// (£1,627.20) and one £887.52 postage charge. Over the whole dataset 1,309 of
	// 541,909 lines (0.24%) are: few enough for a person to review.
	DefaultLargeAmount Money = 500_000
	// DefaultInitialStock is the starting level of every product, in units. Over the
	// three test days the median product sells 10 units and 21 of 1,847 products sell
	// more than 500: most lines find stock, and the best sellers run short on the
	// last day, so every stock verdict occurs.
	DefaultInitialStock = 500
	// DefaultHoldFor bounds how long the decision bolt holds half a join: above
	// 1.25 × the default MessageTimeout (30 s), the latest a tree can time out.
	DefaultHoldFor = 45 * time.Second
	// DefaultRememberFor is how long the stock bolt remembers a verdict, at least.
	DefaultRememberFor = 10 * time.Minute
	// DefaultTickEvery is the tick interval of the decision and stock bolts.
	DefaultTickEvery = time.Second
)

// Options configure the topology. Start from DefaultOptions and set DB.
type Options struct {
	// DB is where the sink writes; its tables must exist (run Schema's statements).
	DB *sink.DB
	// LargeAmount is the risk threshold on |quantity × unit price|: above it a line is
	// flagged LargeAmount. Default DefaultLargeAmount.
	LargeAmount Money
	// InitialStock is every product's level before its first line, in units (>= 0).
	InitialStock int64
	// Stocked tells products (with a stock level) from service codes; nil: IsProduct.
	Stocked func(stockCode string) bool
	// HoldFor bounds how long the decision bolt holds the first half of a join whose
	// other half has not come: on the first tick at which more than
	// ceil(HoldFor/TickEvery) ticks have passed since the half arrived, it is failed
	// and dropped: between HoldFor and HoldFor + 2 × TickEvery after its arrival (later
	// only if the task is too busy to take its ticks). A partner can only be missing
	// because its branch failed or lost the tuple, so the half's tree has failed or
	// will time out; with HoldFor above 1.25 × the topology's MessageTimeout (the
	// latest a tree times out) it has, and dropping the half changes no outcome: the
	// event is being replayed under a new tree, whose halves join on their own. The
	// halves held are thus at most the trees in flight plus those failed in the last
	// HoldFor + 2 × TickEvery. Default 45 s (for the default 30 s timeout).
	HoldFor time.Duration
	// RememberFor is how long, at least, the stock bolt remembers the verdict it gave
	// an event (at most twice that), so that a replay within it moves no stock. It
	// must exceed the longest time between an event's first try and its last replay.
	// Default 10 minutes.
	RememberFor time.Duration
	// TickEvery is the tick interval of the decision bolt (eviction of held halves)
	// and of the stock bolt (forgetting verdicts). Default 1 s; at most HoldFor.
	TickEvery time.Duration
	// Parallelism is the number of tasks of each bolt (parse, risk, stock, decision,
	// sink). Default 2. The spout has one task.
	Parallelism int
	// BatchRows and BatchDelay are the sink's (see sink.Options); 0 takes its defaults.
	BatchRows  int
	BatchDelay time.Duration
	// Counters and SinkCounters, if set, receive the pipeline's and the sink's counts.
	Counters     *Counters
	SinkCounters *sink.Counters
	// SinkHealth, if set, is told when the sink's database stops and starts taking
	// writes (sink.Options.Health).
	SinkHealth *sink.Health
	// MessageTimeout is the topology's (sink.Options.MessageTimeout: the sink's
	// waits are kept under it); 0 keeps the sink's fixed defaults.
	MessageTimeout time.Duration
	// SinkGiveUpAfter bounds a sink outage (sink.Options.GiveUpAfter); 0: none.
	SinkGiveUpAfter time.Duration

	// Tests only: inject(component, eventID) true makes risk fail the input before
	// emitting, stock fail it after applying its verdict; wrapSink wraps sink tasks.
	inject   func(component, eventID string) bool
	wrapSink func(topology.Bolt) topology.Bolt
}

// DefaultOptions returns the defaults documented on Options (DB unset).
func DefaultOptions() Options {
	return Options{
		LargeAmount:  DefaultLargeAmount,
		InitialStock: DefaultInitialStock,
		HoldFor:      DefaultHoldFor,
		RememberFor:  DefaultRememberFor,
		TickEvery:    DefaultTickEvery,
		Parallelism:  2,
	}
}

// Counters count what the pipeline's bolts did, summed over their tasks. Safe to read
// at any time.
type Counters struct {
	// NotOrderLines: inputs parse failed because they are not order lines (each try).
	NotOrderLines atomic.Uint64
	// StockApplied: lines the stock bolt applied (one per event while remembered);
	// StockReplayed: replays it answered with the verdict it gave before.
	StockApplied, StockReplayed atomic.Uint64
	// Joined: decisions emitted (one per try that reached the join complete).
	Joined atomic.Uint64
	// Evicted: halves the decision bolt failed and dropped after HoldFor.
	Evicted atomic.Uint64
	// Held: halves the decision bolt holds now, waiting for their partner.
	Held atomic.Int64
	// Unpaired: halves still held when their decision task stopped, dropped then.
	Unpaired atomic.Uint64
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("orders: options: "+format, a...)
	}
	switch {
	case o.DB == nil:
		return bad("no DB (use sink.Open, then create the tables with Schema)")
	case o.LargeAmount < 0:
		return bad("LargeAmount %v is negative", o.LargeAmount)
	case o.InitialStock < 0:
		return bad("InitialStock %d is negative", o.InitialStock)
	case o.TickEvery <= 0:
		return bad("TickEvery %v, must be > 0 (start from DefaultOptions)", o.TickEvery)
	case o.HoldFor < o.TickEvery:
		return bad("HoldFor %v is shorter than TickEvery %v", o.HoldFor, o.TickEvery)
	case o.RememberFor < o.TickEvery:
		return bad("RememberFor %v is shorter than TickEvery %v", o.RememberFor, o.TickEvery)
	case o.Parallelism < 1:
		return bad("Parallelism %d, must be >= 1", o.Parallelism)
	}
	return nil
}

// Build returns the order topology reading from spout (one task; see the package doc
// for what it must emit). Errors: invalid options, the sink's option errors, and the
// builder's (wrapping topology.ErrTopology).
func Build(spout func() topology.Spout, opts Options) (*topology.Topology, error) {
	if spout == nil {
		return nil, errors.New("orders: nil spout factory")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Counters == nil {
		opts.Counters = &Counters{}
	}
	sinkOpts := sink.Options{
		DB: opts.DB, Tables: []sink.Table{OrderLinesTable}, Rows: Rows, After: Summarize,
		BatchRows: opts.BatchRows, BatchDelay: opts.BatchDelay, Counters: opts.SinkCounters,
		Health: opts.SinkHealth, MessageTimeout: opts.MessageTimeout,
		GiveUpAfter: opts.SinkGiveUpAfter,
	}
	sinkBolt, err := sink.NewBolt(sinkOpts)
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	if opts.wrapSink != nil {
		inner := sinkBolt
		sinkBolt = func() topology.Bolt { return opts.wrapSink(inner()) }
	}
	delay := opts.BatchDelay
	if delay == 0 {
		delay = sink.DefaultBatchDelay
	}
	// Every task's state is its own, made in its factory or Prepare (the stock levels,
	// the held halves, the sink's batch). What the factories share is o, read-only:
	// the options, whose Stocked function (nil: IsProduct over a fixed table) is
	// immutable, and whose Counters are the pipeline's metrics hand-off, which tasks
	// add to and never read. The results go to the sink's database.
	o := &opts
	p := opts.Parallelism
	b := topology.NewBuilder()
	b.SetSpout(SpoutID, spout, 1).Output(ingest.SpoutFields...)
	b.SetBasicBolt(ParseID, func() topology.BasicBolt { return &parseBolt{o: o} }, p).
		ShuffleGrouping(SpoutID).Output(LineFields...)
	b.SetBasicBolt(RiskID, func() topology.BasicBolt { return &riskBolt{o: o} }, p).
		ShuffleGrouping(ParseID).Output(riskFields...)
	b.SetBasicBolt(StockID, func() topology.BasicBolt { return &stockBolt{o: o} }, p).
		FieldsGrouping(ParseID, "stock_code").Output(stockFields...).TickEvery(opts.TickEvery)
	b.SetBolt(DecisionID, func() topology.Bolt { return newDecisionBolt(o) }, p).
		Input(RiskID, tuple.DefaultStream, topology.Fields("event_id")).
		Input(StockID, tuple.DefaultStream, topology.Fields("event_id")).
		Output(DecisionFields...).TickEvery(opts.TickEvery)
	// One invoice, one writer: its lines and its summary row are written by one task,
	// so two transactions never race on the same invoice_summary row.
	b.SetBolt(SinkID, sinkBolt, p).FieldsGrouping(DecisionID, "invoice_no").TickEvery(delay)
	return b.Build()
}
