package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// errInjected is the failure tests inject (Options.inject).
var errInjected = errors.New("orders: injected failure")

// errUnpaired is the reason a held half is failed with when its partner never came.
var errUnpaired = errors.New("orders: decision: the other half never came")

// parseBolt decodes a log record (the fields ingest.SpoutFields) into an order line
// (LineFields).
type parseBolt struct{ o *Options }

func (b *parseBolt) Prepare(context.Context, topology.TaskContext) error { return nil }
func (b *parseBolt) Cleanup() error                                      { return nil }

// Execute emits the line's LineFields. An input that is not an order line
// (not a log record, another event type, a payload DecodeLine refuses) is reported and
// failed: the error wraps ErrNotOrderLine, and replaying it can never succeed, so a
// spout should stop retrying it. The tree's failure reason (topology.ReasonedSpout)
// then contains "orders: not an order line".
func (b *parseBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	line, err := parse(t)
	if err != nil {
		b.o.Counters.NotOrderLines.Add(1)
		out.ReportError(err)
		return err
	}
	return out.Emit(lineValues(line))
}

func parse(t *tuple.Tuple) (*OrderLine, error) {
	rec, err := ingest.SpoutRecord(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotOrderLine, err)
	}
	if rec.Event.Type != Type {
		return nil, fmt.Errorf("%w: event %s (log seq %d) has type %q, want %q", ErrNotOrderLine, rec.Event.ID, rec.Seq, rec.Event.Type, Type)
	}
	l, err := DecodeLine(rec.Event.ID, rec.Event.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w (log seq %d)", err, rec.Seq)
	}
	return &l, nil
}

// riskFields are the fields of risk's tuples: the line and its Flags as a uint8.
var riskFields = append(append([]string(nil), LineFields...), "flags")

// riskBolt flags lines (Assess). Stateless.
type riskBolt struct{ o *Options }

func (b *riskBolt) Prepare(context.Context, topology.TaskContext) error { return nil }
func (b *riskBolt) Cleanup() error                                      { return nil }

// Execute emits the line (LineFields) and its flags (uint8), for the decision to
// join with the stock verdict.
func (b *riskBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	line, err := lineOf(t)
	if err != nil {
		return err
	}
	if b.o.inject != nil && b.o.inject(RiskID, line.EventID) {
		return errInjected
	}
	return out.Emit(lineValues(&line, uint8(Assess(&line, b.o.LargeAmount))))
}

// stockBolt applies lines to the stock levels of its stock codes (fields grouping on
// stock_code: one code, one task, one level).
type stockBolt struct {
	o       *Options
	stock   *Stock
	rotated time.Time // tick time of the last Rotate; zero before the first tick
}

func (b *stockBolt) Prepare(context.Context, topology.TaskContext) error {
	b.stock = NewStock(b.o.InitialStock, b.o.Stocked)
	return nil
}

func (b *stockBolt) Cleanup() error { return nil }

// stockFields are the fields of stock's tuples: the event id and its StockVerdict.
var stockFields = []string{"event_id", "stock", "stock_level"}

// Execute emits (event_id, stock, stock_level): the StockVerdict. A replayed event gets the verdict it was
// given first and moves no stock. On a tick, verdicts are forgotten in generations of
// RememberFor (see Stock).
func (b *stockBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	if t.IsTick() {
		now := t.Value(0).(time.Time)
		switch {
		case b.rotated.IsZero():
			b.rotated = now
		case now.Sub(b.rotated) >= b.o.RememberFor:
			b.stock.Rotate()
			b.rotated = now
		}
		return nil
	}
	line, err := lineOf(t)
	if err != nil {
		return err
	}
	v, replay := b.stock.Apply(line.EventID, line.StockCode, line.Quantity)
	if replay {
		b.o.Counters.StockReplayed.Add(1)
	} else {
		b.o.Counters.StockApplied.Add(1)
	}
	// Injected after the verdict is applied, as a crash after the effect would be: the
	// replay must then find the verdict and not move the stock again.
	if b.o.inject != nil && b.o.inject(StockID, line.EventID) {
		return errInjected
	}
	return out.Emit(tuple.Values{line.EventID, v.Verdict, v.Level})
}

// joinKey names one try of one event: its id and the root of the tuple tree the try
// belongs to (the spout emits every try with a fresh root), so that halves of
// different tries, one of which has failed, never join.
type joinKey struct {
	id   string
	root uint64
}

// half is a held input of the join and the tick count when it arrived.
type half struct {
	t    *tuple.Tuple
	tick uint64
}

// decisionBolt joins the risk and stock halves of each order line (fields grouping on
// event_id from both: the halves of one event meet in one task), and emits the decision
// anchored to both halves, so the decision's tree is the event's whole tree.
type decisionBolt struct {
	o         *Options
	out       topology.OutputCollector
	held      map[joinKey]half
	ticks     uint64
	holdTicks uint64 // a half is evicted once more than holdTicks ticks passed
}

func newDecisionBolt(o *Options) *decisionBolt {
	hold := uint64((o.HoldFor + o.TickEvery - 1) / o.TickEvery) // ceil: at least HoldFor
	return &decisionBolt{o: o, held: map[joinKey]half{}, holdTicks: hold}
}

func (d *decisionBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	d.out = out
	return nil
}

// Execute holds the first half of a join; when the second arrives it emits the
// decision (DecisionFields) anchored to both and acks both. On a tick it fails
// and drops the halves that waited more than HoldFor, which bounds the held map (see
// Options.HoldFor). A tick scans the map: O(halves held), every TickEvery.
func (d *decisionBolt) Execute(t *tuple.Tuple) {
	if t.IsTick() {
		d.ticks++
		for k, h := range d.held {
			if d.ticks-h.tick > d.holdTicks {
				// Its tree has failed or timed out by now (HoldFor > 1.25 × timeout): the
				// fail changes no outcome; it ends this task's hold on the tuple.
				_ = d.out.FailWith(h.t, fmt.Errorf("%w: event %s, %s half held %v", errUnpaired, k.id, h.t.SourceComponent(), d.o.HoldFor))
				delete(d.held, k)
				d.o.Counters.Held.Add(-1)
				d.o.Counters.Evicted.Add(1)
			}
		}
		return
	}
	k := joinKey{id: t.StringByField("event_id"), root: t.Root()}
	h, ok := d.held[k]
	if !ok {
		d.held[k] = half{t: t, tick: d.ticks}
		d.o.Counters.Held.Add(1)
		return
	}
	if h.t.SourceComponent() == t.SourceComponent() {
		// Each branch emits one tuple per try: a second one is a bug upstream. Fail the
		// newcomer (its tree replays) and keep waiting for the real partner.
		err := fmt.Errorf("orders: decision: two %s halves for event %s in one tree", t.SourceComponent(), k.id)
		d.out.ReportError(err)
		_ = d.out.FailWith(t, err)
		return
	}
	delete(d.held, k)
	d.o.Counters.Held.Add(-1)
	risk, stock := h.t, t
	if t.SourceComponent() == RiskID {
		risk, stock = t, h.t
	}
	line, err := lineOf(risk)
	flags, ok1 := risk.ValueByField("flags").(uint8)
	verdict, ok2 := stock.ValueByField("stock").(string)
	level, ok3 := stock.ValueByField("stock_level").(int64)
	if err == nil && !(ok1 && ok2 && ok3) {
		err = fmt.Errorf("flags %T, stock %T, stock_level %T: want uint8, string, int64",
			risk.ValueByField("flags"), stock.ValueByField("stock"), stock.ValueByField("stock_level"))
	}
	if err == nil {
		v := StockVerdict{Verdict: verdict, Level: level}
		// Anchored to both halves (seed 000 §3.2): the decision joins both trees' edges,
		// so a failure anywhere downstream fails the event and the spout replays it.
		err = d.out.Emit(lineValues(&line, flags, verdict, level, Decide(Flags(flags), v)), risk, stock)
	}
	if err != nil {
		err = fmt.Errorf("orders: decision for event %s: %w", k.id, err)
		d.out.ReportError(err)
		_ = d.out.FailWith(risk, err)
		_ = d.out.FailWith(stock, err)
		return
	}
	_ = d.out.Ack(risk)
	_ = d.out.Ack(stock)
	d.o.Counters.Joined.Add(1)
}

// Cleanup drops the halves still held: the task is stopped, so they can be neither
// acked nor failed; their trees have failed already or time out.
func (d *decisionBolt) Cleanup() error {
	d.o.Counters.Held.Add(-int64(len(d.held)))
	d.o.Counters.Unpaired.Add(uint64(len(d.held)))
	clear(d.held)
	return nil
}
