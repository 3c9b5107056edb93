package builtin_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// exprRun runs spout -> filter -> key -> map -> sink in process until every tree
// ended, and returns what the sink received and the spout.
func exprRun(t *testing.T, vals []tuple.Values, filter, key string, outs []builtin.MapField) ([]tuple.Values, *exprSpout) {
	t.Helper()
	in := []string{"order", "quantity", "payload"}
	f, err := builtin.NewFilterBolt(filter, in)
	if err != nil {
		t.Fatal(err)
	}
	k, err := builtin.NewKeyBolt(key, f.Fields(), builtin.WithKeyField("sku"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := builtin.NewMapBolt(outs, k.Fields())
	if err != nil {
		t.Fatal(err)
	}
	spout := &exprSpout{vals: vals}
	var mu sync.Mutex
	var got []tuple.Values
	b := topology.NewBuilder()
	b.SetSpout("orders", func() topology.Spout { return spout }, 1).Output(in...)
	b.SetBasicBolt("positive", f.BasicBolt, 2).ShuffleGrouping("orders").Output(f.Fields()...)
	b.SetBasicBolt("key", k.BasicBolt, 2).ShuffleGrouping("positive").Output(k.Fields()...)
	b.SetBasicBolt("map", m.BasicBolt, 2).FieldsGrouping("key", "sku").Output(m.Fields()...)
	b.SetBolt("sink", func() topology.Bolt { return &exprSink{mu: &mu, got: &got} }, 1).ShuffleGrouping("map")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := engine.Start(ctx, topo, exprQuiet())
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Exhausted()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-rt.Done()
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(got, func(a, b tuple.Values) int { return strings.Compare(a[0].(string), b[0].(string)) })
	return got, spout
}

// Filter, Key and Map run on real tuples: what passes, each key, each mapped value,
// every tree acked; an input whose field has a type the expression cannot take
// fails alone, with a reason naming the component, the expression and the value,
// and the tasks go on with the inputs after it.
func TestExprBoltsRun(t *testing.T) {
	vals := []tuple.Values{
		{"a", 3, []byte(`{"sku": "X1", "price": 1.5}`)},
		{"b", 0, []byte(`{"sku": "X2", "price": 2}`)},
		{"c", -2, []byte(`{"sku": "X3", "price": 2}`)},
		{"d", "seven", []byte(`{"sku": "X4", "price": 2}`)}, // quantity of the wrong type
		{"e", 2, []byte(`{"sku": "X1", "price": 0.25}`)},
		{"f", 1, []byte(`not json`)}, // fails in Key
	}
	got, spout := exprRun(t, vals, "quantity > 0", "fromJSON(payload).sku",
		[]builtin.MapField{{Name: "order", Expr: "upper(order)"}, {Name: "sku", Expr: "sku"}, {Name: "total", Expr: "quantity * fromJSON(payload).price"}})
	want := []tuple.Values{{"A", "X1", 4.5}, {"E", "X1", 0.5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("sink got %v, want %v", got, want)
	}
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if spout.acked != 4 || len(spout.reasons) != 2 {
		t.Fatalf("acked %d, failed %v; want 4 acked (a, b, c, e), 2 failed (d, f)", spout.acked, spout.reasons)
	}
	t.Logf("reasons: %v", spout.reasons)
	if r := spout.reasons[3]; !strings.Contains(r, `bolt "positive": gale.bolt.Filter: expression "quantity > 0": invalid operation: string > int (quantity = string "seven")`) {
		t.Errorf("reason of d: %q", r)
	}
	if r := spout.reasons[5]; !strings.Contains(r, `bolt "key": gale.bolt.Key: expression "fromJSON(payload).sku": `) || !strings.Contains(r, `payload = string "not json"`) {
		t.Errorf("reason of f: %q", r)
	}
}

// A filter's result must be a bool for every input: an input on which it is not
// fails, naming the result.
func TestExprFilterResultNotBool(t *testing.T) {
	vals := []tuple.Values{{"a", true, []byte(`{}`)}, {"b", 7, []byte(`{}`)}, {"c", false, []byte(`{}`)}}
	got, spout := exprRun(t, vals, "quantity", "order", []builtin.MapField{{Name: "order", Expr: "order"}})
	if want := []tuple.Values{{"a"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("sink got %v, want %v", got, want)
	}
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if spout.acked != 2 || len(spout.reasons) != 1 || !strings.Contains(spout.reasons[1], `expression "quantity": `) || !strings.Contains(spout.reasons[1], "quantity = int 7") {
		t.Errorf("acked %d, failed %v; want b failed, naming quantity = int 7", spout.acked, spout.reasons)
	}
}

// $env names the input's fields by string: every field is set for it.
func TestExprEnvVariable(t *testing.T) {
	vals := []tuple.Values{{"a", 3, []byte(`{}`)}, {"b", -1, []byte(`{}`)}}
	got, _ := exprRun(t, vals, `$env["quantity"] > 0`, "order", []builtin.MapField{{Name: "order", Expr: `$env.order + "!"`}})
	if want := []tuple.Values{{"a!"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("sink got %v, want %v", got, want)
	}
}
