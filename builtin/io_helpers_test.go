package builtin

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ioOrder is one invoice line of testdata/retail.
type ioOrder struct {
	lineNo      int // 1 = the first data row of the file
	invoice     string
	stockCode   string
	description string
	quantity    int
	price       float64
	raw         string // the CSV line as in the file
}

// ioRetailLines reads the first n invoice lines of testdata/retail/2010-12-01.csv.
func ioRetailLines(t testing.TB, n int) []ioOrder {
	t.Helper()
	data, err := os.ReadFile("../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	raws := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[1:]
	recs, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	recs = recs[1:]
	if len(recs) != len(raws) || len(recs) < n {
		t.Fatalf("%d records, %d lines: want at least %d, one record a line", len(recs), len(raws), n)
	}
	out := make([]ioOrder, n)
	for i, r := range recs[:n] {
		q, err := strconv.Atoi(r[3])
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.ParseFloat(r[5], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ioOrder{lineNo: i + 1, invoice: r[0], stockCode: r[1], description: r[2], quantity: q, price: p, raw: raws[i]}
	}
	return out
}

// ioOrderFields are the fields of test.Orders' tuples.
var ioOrderFields = []string{"line_no", "event_id", "invoice", "stock_code", "description", "quantity", "price", "line"}

func (o ioOrder) values() tuple.Values {
	return tuple.Values{o.lineNo, fmt.Sprintf("retail-%d", o.lineNo), o.invoice, o.stockCode, o.description, o.quantity, o.price, o.raw}
}

// ioOrdersSpout emits each line `times` times (each a tree of its own: a second
// emit is what a replay after a lost ack would be), replays a failed tree, and is
// exhausted once every tree completed.
type ioOrdersSpout struct {
	lines   []ioOrder
	times   int
	out     topology.SpoutCollector
	next    int
	todo    []int
	pending int
}

func (s *ioOrdersSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *ioOrdersSpout) NextTuple() {
	var i int
	switch {
	case len(s.todo) > 0:
		i, s.todo = s.todo[0], s.todo[1:]
	case s.next < len(s.lines)*s.times:
		i = s.next
		s.next++
	default:
		return
	}
	if err := s.out.Emit(s.lines[i%len(s.lines)].values(), i); err == nil {
		s.pending++
	}
}

func (s *ioOrdersSpout) Ack(any)      { s.pending-- }
func (s *ioOrdersSpout) Fail(id any)  { s.pending--; s.todo = append(s.todo, id.(int)) }
func (s *ioOrdersSpout) Close() error { return nil }
func (s *ioOrdersSpout) Exhausted() bool {
	return s.next == len(s.lines)*s.times && len(s.todo) == 0 && s.pending == 0
}

// ioRegistry is every built-in class, and test.Orders emitting lines (times each).
func ioRegistry(t testing.TB, lines []ioOrder, times int) *component.Registry {
	t.Helper()
	reg := &component.Registry{}
	for _, d := range Components() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	err := reg.Register(component.Declaration{
		Class: "test.Orders",
		Doc:   "emits retail invoice lines",
		Spout: func(component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &ioOrdersSpout{lines: lines, times: times} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: ioOrderFields}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// ioBuild writes doc as a Flux file in dir and builds it with reg.
func ioBuild(t testing.TB, dir, doc string, reg *component.Registry) *flux.Built {
	t.Helper()
	path := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(reg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ioStart runs b's topology in process; stop (also run when the test ends) stops it.
func ioStart(t testing.TB, b *flux.Built) (rt *engine.Runtime, stop func()) {
	t.Helper()
	rt, err := engine.Start(context.Background(), b.Topology, b.Config)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := rt.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			<-rt.Done()
		})
	}
	t.Cleanup(stop)
	return rt, stop
}

// ioRunToEnd runs b's topology until its spouts are exhausted (every tree
// completed), then stops it.
func ioRunToEnd(t testing.TB, b *flux.Built) {
	t.Helper()
	rt, stop := ioStart(t, b)
	select {
	case <-rt.Exhausted():
	case <-rt.Done():
		t.Fatal("the topology ended before its spout was exhausted")
	case <-time.After(60 * time.Second): // a hang, not a slow machine
		t.Fatal("the spout's trees did not all complete in 60s")
	}
	stop()
}
