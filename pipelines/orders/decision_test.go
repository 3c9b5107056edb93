package orders

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// fakeOut records what a bolt does with its OutputCollector.
type fakeOut struct {
	emits   []emitted
	acked   []*tuple.Tuple
	failed  []*tuple.Tuple
	errs    []error
	reasons []string
}

type emitted struct {
	values  tuple.Values
	anchors []*tuple.Tuple
}

func (f *fakeOut) Emit(v tuple.Values, anchors ...*tuple.Tuple) error {
	f.emits = append(f.emits, emitted{v, anchors})
	return nil
}
func (f *fakeOut) EmitTo(_ string, v tuple.Values, anchors ...*tuple.Tuple) error {
	return f.Emit(v, anchors...)
}
func (f *fakeOut) EmitDirect(int, string, tuple.Values, ...*tuple.Tuple) error {
	return errors.New("no direct emits here")
}
func (f *fakeOut) Ack(t *tuple.Tuple) error  { f.acked = append(f.acked, t); return nil }
func (f *fakeOut) Fail(t *tuple.Tuple) error { f.failed = append(f.failed, t); return nil }
func (f *fakeOut) FailWith(t *tuple.Tuple, reason error) error {
	f.reasons = append(f.reasons, reason.Error())
	return f.Fail(t)
}
func (f *fakeOut) ResetTimeout(t *tuple.Tuple) error { return nil }
func (f *fakeOut) ReportError(err error)             { f.errs = append(f.errs, err) }
func (f *fakeOut) has(list []*tuple.Tuple, t *tuple.Tuple) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

var (
	riskSrc     = &tuple.Source{Component: RiskID, Stream: tuple.DefaultStream, Fields: tuple.NewFields(riskFields...)}
	stockSrc    = &tuple.Source{Component: StockID, Stream: tuple.DefaultStream, Fields: tuple.NewFields(stockFields...)}
	decisionSrc = &tuple.Source{Component: DecisionID, Stream: tuple.DefaultStream, Fields: tuple.NewFields(DecisionFields...)}
)

// riskHalf and stockHalf are the tuples risk and stock emit, as the decision gets them.
func riskHalf(task int, l *OrderLine, f Flags) *tuple.Tuple {
	return tuple.New(riskSrc, task, lineValues(l, uint8(f)))
}

func stockHalf(task int, id string, v StockVerdict) *tuple.Tuple {
	return tuple.New(stockSrc, task, tuple.Values{id, v.Verdict, v.Level})
}

// decided reads back an emitted decision by field name.
func decided(v tuple.Values) *tuple.Tuple { return tuple.New(decisionSrc, 0, v) }

// inTree makes t look delivered in the tuple tree rooted at root, as the runtime
// would (tuple.New makes untracked tuples; only the runtime sets roots).
func inTree(t *tuple.Tuple, root uint64) *tuple.Tuple {
	st := tupleinternal.StateOf.(func(*tuple.Tuple) *tupleinternal.State)(t)
	st.Root0, st.Edge0 = root, root^0x5a5a
	return t
}

func tick() *tuple.Tuple { return tuple.New(tuple.TickSource, -1, tuple.Values{time.Now()}) }

func newTestDecision(t *testing.T, holdFor, every time.Duration) (*decisionBolt, *fakeOut, *Counters) {
	t.Helper()
	o := DefaultOptions()
	o.HoldFor, o.TickEvery, o.Counters = holdFor, every, &Counters{}
	d := newDecisionBolt(&o)
	out := &fakeOut{}
	if err := d.Prepare(context.Background(), topology.TaskContext{}, out); err != nil {
		t.Fatal(err)
	}
	return d, out, o.Counters
}

// The two halves of one try join into one decision anchored to both, and both are
// acked; the values are the sink's (DecisionFields).
func TestDecisionJoinsBothHalves(t *testing.T) {
	d, out, c := newTestDecision(t, time.Second, 250*time.Millisecond)
	line := &OrderLine{EventID: "2010-12-01:142", InvoiceNo: "C536379", StockCode: "D", Quantity: -1, UnitPrice: 27500, CustomerID: 14527}
	stock := inTree(stockHalf(7, line.EventID, StockVerdict{Verdict: Unstocked}), 42)
	risk := inTree(riskHalf(5, line, Cancellation|NegativeQuantity), 42)
	d.Execute(stock) // stock first: arrival order does not matter
	if len(out.emits) != 0 || c.Held.Load() != 1 {
		t.Fatalf("after one half: %d emits, %d held", len(out.emits), c.Held.Load())
	}
	d.Execute(risk)
	if len(out.emits) != 1 || len(out.acked) != 2 || len(out.failed) != 0 || c.Held.Load() != 0 || c.Joined.Load() != 1 {
		t.Fatalf("emits %d acked %d failed %d held %d joined %d", len(out.emits), len(out.acked), len(out.failed), c.Held.Load(), c.Joined.Load())
	}
	e := out.emits[0]
	if len(e.anchors) != 2 || e.anchors[0] != risk || e.anchors[1] != stock || !out.has(out.acked, risk) || !out.has(out.acked, stock) {
		t.Fatalf("decision anchored to %v, acked %v: want both halves", e.anchors, out.acked)
	}
	dec := decided(e.values)
	got, err := lineOf(dec)
	if err != nil || got != *line || dec.ValueByField("decision") != Review || dec.ValueByField("flags") != uint8(Cancellation|NegativeQuantity) ||
		dec.ValueByField("stock") != Unstocked || dec.ValueByField("stock_level") != int64(0) {
		t.Fatalf("decision values %v (line %+v, %v)", e.values, got, err)
	}
}

// Halves of different tries of one event (different roots) never join: one of the
// tries has failed. Each is failed and dropped one tick after it is HoldFor old.
func TestDecisionEvictsUnpairedHalves(t *testing.T) {
	d, out, c := newTestDecision(t, time.Second, 250*time.Millisecond) // hold 4 ticks
	line := &OrderLine{EventID: "e1", InvoiceNo: "536365", StockCode: "85123A", Quantity: 6, UnitPrice: 2550, CustomerID: 17850}
	oldStock := inTree(stockHalf(7, "e1", StockVerdict{Reserved, 494}), 1)
	d.Execute(tick()) // tick 1
	d.Execute(oldStock)
	newRisk := inTree(riskHalf(5, line, 0), 2)
	d.Execute(tick()) // tick 2
	d.Execute(newRisk)
	if len(out.emits) != 0 || c.Held.Load() != 2 {
		t.Fatalf("halves of two tries joined: %d emits, %d held", len(out.emits), c.Held.Load())
	}
	for i := 3; i <= 5; i++ {
		d.Execute(tick())
	}
	if len(out.failed) != 0 {
		t.Fatalf("evicted at tick 5, after 4 ticks: %d failed", len(out.failed))
	}
	d.Execute(tick()) // tick 6: oldStock arrived after tick 1, more than 4 ticks ago
	if len(out.failed) != 1 || out.failed[0] != oldStock || c.Evicted.Load() != 1 || c.Held.Load() != 1 {
		t.Fatalf("tick 6: failed %v, evicted %d, held %d", out.failed, c.Evicted.Load(), c.Held.Load())
	}
	if want := "orders: decision: the other half never came: event e1, stock half held 1s"; out.reasons[0] != want {
		t.Fatalf("reason %q, want %q", out.reasons[0], want)
	}
	// The new try's stock half still joins the new risk half.
	newStock := inTree(stockHalf(7, "e1", StockVerdict{Reserved, 494}), 2)
	d.Execute(newStock)
	if len(out.emits) != 1 || decided(out.emits[0].values).ValueByField("decision") != Accept || c.Held.Load() != 0 {
		t.Fatalf("new try: %d emits, held %d", len(out.emits), c.Held.Load())
	}
	// Two halves of one branch in one tree: the newcomer is failed and reported.
	line2 := *line
	line2.EventID = "e2"
	a := inTree(riskHalf(5, &line2, 0), 3)
	b := inTree(riskHalf(6, &line2, 0), 3)
	d.Execute(a)
	d.Execute(b)
	if !out.has(out.failed, b) || out.has(out.failed, a) || len(out.errs) != 1 || !strings.Contains(out.errs[0].Error(), "two risk halves for event e2") {
		t.Fatalf("duplicate half: failed %v, errors %v", out.failed, out.errs)
	}
	if err := d.Cleanup(); err != nil || c.Held.Load() != 0 {
		t.Fatalf("Cleanup: %v, held %d", err, c.Held.Load())
	}
}

// parse refuses what is not an order line, with ErrNotOrderLine and a message naming
// the event; a good record becomes an OrderLine.
func TestParseRefusesNonOrderLines(t *testing.T) {
	src := &tuple.Source{Component: SpoutID, Stream: tuple.DefaultStream, Fields: tuple.NewFields(ingest.SpoutFields...)}
	good := event.Event{ID: "2010-12-01:1", Source: Source, Type: Type, Key: "536365",
		Payload: []byte(`{"invoice_no":"536365","stock_code":"85123A","description":"WHITE HANGING HEART T-LIGHT HOLDER","quantity":6,"invoice_date":"2010-12-01 08:26:00","unit_price":2.55,"customer_id":17850,"country":"United Kingdom"}`)}
	l, err := parse(tuple.New(src, 1, ingest.SpoutValues(&event.Record{Seq: 1, Event: good})))
	if err != nil || l.InvoiceNo != "536365" || l.Quantity != 6 || l.UnitPrice != 2550 || l.EventID != good.ID {
		t.Fatalf("parse = %+v, %v", l, err)
	}
	cmd := good
	cmd.ID, cmd.Type, cmd.Payload = "dev-9", "device_command", []byte(`{"device":"thermostat","celsius":21}`)
	wrongPayload := good
	wrongPayload.ID, wrongPayload.Payload = "ol-3", []byte(`{"device":"thermostat","celsius":21}`)
	notRecord := ingest.SpoutValues(&event.Record{Seq: 4, Event: good})
	notRecord[6] = "4" // seq
	for _, tc := range []struct {
		v    tuple.Values
		want string
	}{
		{ingest.SpoutValues(&event.Record{Seq: 9, Event: cmd}), `event dev-9 (log seq 9) has type "device_command", want "order_line"`},
		{ingest.SpoutValues(&event.Record{Seq: 3, Event: wrongPayload}), `event ol-3: json: unknown field "device" (log seq 3)`},
		{notRecord, `field "seq" of a tuple from events is string, not what a log spout emits`},
	} {
		_, err := parse(tuple.New(src, 1, tc.v))
		if !errors.Is(err, ErrNotOrderLine) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%v) = %v, want ErrNotOrderLine and %q", tc.v, err, tc.want)
		}
	}
}
