package builtin_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// exampleOrders emits three invoice lines of testdata/retail, one tree each, and is
// done once all are acked.
type exampleOrders struct {
	out   topology.SpoutCollector
	next  int
	acked int
}

var exampleLines = []tuple.Values{
	{"536365", "85123A", 6},
	{"536365", "71053", 6},
	{"536366", "22633", 6},
}

func (s *exampleOrders) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *exampleOrders) NextTuple() {
	if s.next < len(exampleLines) {
		_ = s.out.Emit(exampleLines[s.next], s.next)
		s.next++
	}
}

func (s *exampleOrders) Ack(any)         { s.acked++ }
func (s *exampleOrders) Fail(id any)     { _ = s.out.Emit(exampleLines[id.(int)], id) }
func (s *exampleOrders) Close() error    { return nil }
func (s *exampleOrders) Exhausted() bool { return s.acked == len(exampleLines) }

// A line sink as a Go value: each tuple one tab-separated line on standard output,
// acked once written (at least once: a replayed tuple would be printed again).
func ExampleNewWriterSink() {
	out, err := builtin.NewWriterSink(os.Stdout, builtin.WithFormat(builtin.TabSeparated),
		builtin.WithLineFields("stock_code", "quantity"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := topology.NewBuilder()
	b.SetSpout("orders", func() topology.Spout { return &exampleOrders{} }, 1).Output("invoice", "stock_code", "quantity")
	b.SetBolt("print", out.Bolt, 1).ShuffleGrouping("orders")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	<-rt.Exhausted()
	if err := rt.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 85123A	6
	// 71053	6
	// 22633	6
}
