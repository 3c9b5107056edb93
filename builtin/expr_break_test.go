package builtin_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// exprRunOne runs spout (fields in, the vals) -> bolt "x" (made by add, with its
// output fields) -> sink, with the options (engine.WithSerialization...), on one
// engine or spread over hosts engines on one transport, until every tree ended,
// and returns what the sink received (sorted by its text) and the spout.
func exprRunOne(t *testing.T, in []string, vals []tuple.Values, hosts int, add func(b *topology.Builder) []string, opts ...engine.Option) ([]tuple.Values, *exprSpout) {
	t.Helper()
	spout := &exprSpout{vals: vals}
	var mu sync.Mutex
	var got []tuple.Values
	b := topology.NewBuilder()
	b.SetSpout("orders", func() topology.Spout { return spout }, 1).Output(in...)
	add(b)
	b.SetBolt("sink", func() topology.Bolt { return &exprSink{mu: &mu, got: &got} }, 1).ShuffleGrouping("x")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := exprQuiet()
	var rts []*engine.Runtime
	if hosts <= 1 {
		rt, err := engine.Start(ctx, topo, cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	} else {
		as, err := engine.Spread(topo, cfg, hosts)
		if err != nil {
			t.Fatal(err)
		}
		tr := transport.NewLocal()
		for _, a := range as {
			rt, err := engine.Start(ctx, topo, cfg, append([]engine.Option{engine.WithTransport(tr), engine.WithAssignment(a)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			rts = append(rts, rt)
		}
	}
	waitfor.True(t, 20*time.Second, "every tree ended", spout.Exhausted)
	if err := rts[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		<-rt.Done()
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(got, func(a, b tuple.Values) int { return strings.Compare(fmt.Sprint(a...), fmt.Sprint(b...)) })
	return got, spout
}

// $env is the expression's variables: a Map or Key whose result is $env (or holds
// it) must emit a map of its own input's fields, not the task's variables, which
// the next input overwrites while the tuple is on its way.
func TestExprEnvResultIsTheInputsOwn(t *testing.T) {
	in := []string{"order", "quantity"}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "all", Expr: "$env"}, {Name: "in", Expr: "[$env]"}}, in)
	if err != nil {
		t.Fatal(err)
	}
	vals := []tuple.Values{{"a", 1}, {"b", 2}, {"c", 3}}
	got, _ := exprRunOne(t, in, vals, 1, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", m.BasicBolt, 1).ShuffleGrouping("orders").Output(m.Fields()...)
		return m.Fields()
	})
	var orders []string
	for _, g := range got {
		all := g[0].(map[string]any)
		inner := g[1].([]any)[0].(map[string]any)
		orders = append(orders, fmt.Sprintf("%v/%v/%v", all["order"], all["quantity"], inner["order"]))
	}
	slices.Sort(orders)
	if want := []string{"a/1/a", "b/2/b", "c/3/c"}; !slices.Equal(orders, want) {
		t.Errorf("the sink got $env as %v, want %v", orders, want)
	}
}
