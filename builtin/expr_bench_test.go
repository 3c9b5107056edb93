package builtin_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The bar: an expression-language map or filter costs at most 20% over
// the same function written in Go. Each benchmark runs the same topology, a Go
// spout -> the bolt -> a Go sink, tracked (an acker, every tuple anchored), in
// process with engine.Start, once with the expression bolt and once with the Go
// bolt, alternately, round after round (so both see the same machine load), and
// reports each one's tuples/s, the ratio of their costs (expr time / Go time)
// and the median of the rounds' ratios (robust to a burst of load in one round).
//
//	go test -run '^$' -bench 'BenchmarkExprVsGo' -benchtime 20x ./builtin/

const exprBenchTuples = 20_000 // per topology run

var exprBenchFields = []string{"order", "quantity", "price"}

// exprBenchSpout emits n tracked tuples and is exhausted once all are acked.
type exprBenchSpout struct {
	n, next int
	out     topology.SpoutCollector
	vals    []tuple.Values
	done    atomic.Int64
}

func (s *exprBenchSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *exprBenchSpout) NextTuple() {
	if s.next < s.n {
		_ = s.out.Emit(s.vals[s.next%len(s.vals)], s.next)
		s.next++
	}
}

func (s *exprBenchSpout) Ack(any)         { s.done.Add(1) }
func (s *exprBenchSpout) Fail(any)        { s.done.Add(1) }
func (s *exprBenchSpout) Close() error    { return nil }
func (s *exprBenchSpout) Exhausted() bool { return s.next == s.n && s.done.Load() == int64(s.n) }

type exprBenchSink struct{ topology.BaseBolt }

func (b *exprBenchSink) Execute(t *tuple.Tuple) { _ = b.Out.Ack(t) }

// Go versions of the expressions, as a user would write them: the fields by
// position, a type assertion.
type exprGoFilter struct{ topology.BaseBasicBolt }

func (*exprGoFilter) Execute(in *tuple.Tuple, out topology.BasicCollector) error {
	q, ok := in.Value(1).(int)
	if !ok {
		return fmt.Errorf("quantity: %T, not an int", in.Value(1))
	}
	if q > 0 {
		return out.Emit(in.Values())
	}
	return nil
}

type exprGoMap struct{ topology.BaseBasicBolt }

func (*exprGoMap) Execute(in *tuple.Tuple, out topology.BasicCollector) error {
	q, ok := in.Value(1).(int)
	if !ok {
		return fmt.Errorf("quantity: %T, not an int", in.Value(1))
	}
	p, ok := in.Value(2).(float64)
	if !ok {
		return fmt.Errorf("price: %T, not a float64", in.Value(2))
	}
	return out.Emit(tuple.Values{in.Value(0), float64(q) * p})
}

// exprRunBench runs one topology over exprBenchTuples tuples and returns how long it took
// from start to the last ack.
func exprRunBench(b *testing.B, bolt func() topology.BasicBolt, outFields []string) time.Duration {
	b.Helper()
	vals := make([]tuple.Values, 1000)
	for i := range vals {
		vals[i] = tuple.Values{fmt.Sprintf("o%d", i), i%10 - 2, 0.5 + float64(i%7)} // 2 in 10 filtered out
	}
	spout := &exprBenchSpout{n: exprBenchTuples, vals: vals}
	tb := topology.NewBuilder()
	tb.SetSpout("spout", func() topology.Spout { return spout }, 1).Output(exprBenchFields...)
	tb.SetBasicBolt("bolt", bolt, 1).ShuffleGrouping("spout").Output(outFields...)
	tb.SetBolt("sink", func() topology.Bolt { return &exprBenchSink{} }, 1).ShuffleGrouping("bolt")
	topo, err := tb.Build()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	rt, err := engine.Start(ctx, topo, exprQuiet())
	if err != nil {
		b.Fatal(err)
	}
	<-rt.Exhausted()
	took := time.Since(start)
	if err := rt.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	<-rt.Done()
	return took
}

func exprBenchPair(b *testing.B, exprBolt, goBolt func() topology.BasicBolt, outFields []string) {
	var exprTime, goTime time.Duration
	var ratios []float64 // per round: the other engineers' load changes by the second
	for i := 0; i < b.N; i++ {
		var e, g time.Duration
		if i%2 == 0 { // alternate which goes first
			e = exprRunBench(b, exprBolt, outFields)
			g = exprRunBench(b, goBolt, outFields)
		} else {
			g = exprRunBench(b, goBolt, outFields)
			e = exprRunBench(b, exprBolt, outFields)
		}
		exprTime, goTime = exprTime+e, goTime+g
		ratios = append(ratios, e.Seconds()/g.Seconds())
	}
	slices.Sort(ratios)
	n := float64(b.N * exprBenchTuples)
	b.ReportMetric(n/exprTime.Seconds(), "expr-tuples/s")
	b.ReportMetric(n/goTime.Seconds(), "go-tuples/s")
	b.ReportMetric(exprTime.Seconds()/goTime.Seconds(), "expr/go-time")
	b.ReportMetric(ratios[len(ratios)/2], "median-expr/go")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkExprVsGoFilter(b *testing.B) {
	f, err := builtin.NewFilterBolt("quantity > 0", exprBenchFields)
	if err != nil {
		b.Fatal(err)
	}
	exprBenchPair(b, f.BasicBolt, func() topology.BasicBolt { return &exprGoFilter{} }, exprBenchFields)
}

func BenchmarkExprVsGoMap(b *testing.B) {
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "order", Expr: "order"}, {Name: "total", Expr: "quantity * price"}}, exprBenchFields)
	if err != nil {
		b.Fatal(err)
	}
	exprBenchPair(b, m.BasicBolt, func() topology.BasicBolt { return &exprGoMap{} }, m.Fields())
}

// exprNopCollector takes emits and drops them: the bolt's own cost, without the engine.
type exprNopCollector struct{ n int }

func (c *exprNopCollector) Emit(tuple.Values) error                    { c.n++; return nil }
func (c *exprNopCollector) EmitTo(string, tuple.Values) error          { c.n++; return nil }
func (c *exprNopCollector) EmitDirect(int, string, tuple.Values) error { c.n++; return nil }
func (c *exprNopCollector) ResetTimeout() error                        { return nil }
func (c *exprNopCollector) ReportError(error)                          {}

// The bolts' Execute alone, per input: what the expression costs over Go where
// the engine's own work (queues, acker, anchoring) is left out.
//
//	go test -run '^$' -bench 'BenchmarkExprExecute' ./builtin/
func BenchmarkExprExecute(b *testing.B) {
	f, err := builtin.NewFilterBolt("quantity > 0", exprBenchFields)
	if err != nil {
		b.Fatal(err)
	}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "order", Expr: "order"}, {Name: "total", Expr: "quantity * price"}}, exprBenchFields)
	if err != nil {
		b.Fatal(err)
	}
	src := &tuple.Source{Component: "spout", Stream: tuple.DefaultStream, Fields: tuple.NewFields(exprBenchFields...)}
	in := tuple.New(src, 1, tuple.Values{"o1", 3, 1.5})
	for _, c := range []struct {
		name string
		bolt topology.BasicBolt
	}{{"filter/expr", f.BasicBolt()}, {"filter/go", &exprGoFilter{}}, {"map/expr", m.BasicBolt()}, {"map/go", &exprGoMap{}}} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.bolt.Prepare(context.Background(), topology.TaskContext{Component: "bolt"}); err != nil {
				b.Fatal(err)
			}
			out := &exprNopCollector{}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.bolt.Execute(in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
