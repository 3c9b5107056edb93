package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
	"github.com/gale-stream/gale/tuple"
)

// exprRunOne runs spout (fields in, the vals) -> bolt "x" (made by add, with its
// output fields) -> sink, with the options (engine.WithSerialization...), on one
// engine or spread over hosts engines on one transport (tr's, or a local one), until every tree ended,
// and returns what the sink received (sorted by its text) and the spout.
func exprRunOne(t *testing.T, in []string, vals []tuple.Values, hosts int, tr func(*topology.Topology) transport.Transport, add func(b *topology.Builder) []string, opts ...engine.Option) ([]tuple.Values, *exprSpout) {
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
		var shared transport.Transport = transport.NewLocal()
		if tr != nil {
			shared = tr(topo)
		}
		for _, a := range as {
			rt, err := engine.Start(ctx, topo, cfg, append([]engine.Option{engine.WithTransport(shared), engine.WithAssignment(a)}, opts...)...)
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
	got, _ := exprRunOne(t, in, vals, 1, nil, func(b *topology.Builder) []string {
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

// A Map's or Key's result of a type no tuple can carry between workers (expr's
// duration(), groupBy's map of any keys, toPairs' arrays) fails its input with a
// reason naming the expression and the type, whether the engines serialize every
// emit (engine.WithSerialization) or only the transport does, as a cluster's: it
// was lost at send, logged, and its tree left to time out and replay, forever.
func TestExprResultNotEncodableFailsTheInput(t *testing.T) {
	in := []string{"order", "quantity"}
	serializing := func(topo *topology.Topology) transport.Transport {
		st := codec.NewStreams(topo)
		return transporttest.NewFaulty(transport.NewLocal(), transporttest.Serialize(func(m *transport.Message) (*transport.Message, error) {
			return codec.Clone(m, st)
		}))
	}
	for _, c := range []struct {
		name  string
		tr    func(*topology.Topology) transport.Transport
		opts  []engine.Option
		hosts int
	}{
		{"in process", nil, nil, 1},
		{"WithSerialization, two engines", nil, []engine.Option{engine.WithSerialization()}, 2},
		{"serializing transport, two engines", serializing, nil, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "order", Expr: "order"}, {Name: "d", Expr: `quantity > 1 ? duration("1h") : quantity`}}, in)
			if err != nil {
				t.Fatal(err)
			}
			vals := []tuple.Values{{"a", 1}, {"b", 2}, {"c", 0}}
			got, spout := exprRunOne(t, in, vals, c.hosts, c.tr, func(b *topology.Builder) []string {
				b.SetBasicBolt("x", m.BasicBolt, 2).ShuffleGrouping("orders").Output(m.Fields()...)
				return m.Fields()
			}, c.opts...)
			if want := []tuple.Values{{"a", 1}, {"c", 0}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("sink got %v, want %v", got, want)
			}
			spout.mu.Lock()
			defer spout.mu.Unlock()
			r := spout.reasons[1]
			if spout.acked != 2 || len(spout.reasons) != 1 || !strings.Contains(r, `gale.bolt.Map: expression "quantity > 1 ? duration(\"1h\") : quantity"`) ||
				!strings.Contains(r, "time.Duration is not encodable") || !strings.Contains(r, "quantity = int 2") {
				t.Errorf("acked %d, failed %v; want b failed, naming the expression, the type and quantity = int 2", spout.acked, spout.reasons)
			}
		})
	}
}

// A Key whose key cannot travel in a tuple fails its input, naming the type.
func TestExprKeyNotEncodableFailsTheInput(t *testing.T) {
	in := []string{"order", "quantity"}
	k, err := builtin.NewKeyBolt(`quantity > 1 ? groupBy([quantity], #) : order`, in)
	if err != nil {
		t.Fatal(err)
	}
	got, spout := exprRunOne(t, in, []tuple.Values{{"a", 1}, {"b", 2}}, 1, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", k.BasicBolt, 1).ShuffleGrouping("orders").Output(k.Fields()...)
		return k.Fields()
	})
	if want := []tuple.Values{{"a", 1, "a"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("sink got %v, want %v", got, want)
	}
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if r := spout.reasons[1]; len(spout.reasons) != 1 || !strings.Contains(r, "gale.bolt.Key: expression") || !strings.Contains(r, "maps must have string keys") {
		t.Errorf("failed %v; want b failed, its key a map of int keys", spout.reasons)
	}
}

// A Filter or Key passes its input's values on under the fields it was made for:
// made for [order quantity] but reading a stream of [quantity order], it emitted
// each quantity as the order and each order as the quantity. Such an input fails,
// saying the fields it has and the ones the bolt was made for.
func TestExprInputOfOtherFieldsFails(t *testing.T) {
	made := []string{"order", "quantity"}
	f, err := builtin.NewFilterBolt("quantity > 0", made)
	if err != nil {
		t.Fatal(err)
	}
	k, err := builtin.NewKeyBolt("upper(order)", made)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(b *topology.Builder) []string
	}{
		{"filter", func(b *topology.Builder) []string {
			b.SetBasicBolt("x", f.BasicBolt, 1).ShuffleGrouping("orders").Output(f.Fields()...)
			return f.Fields()
		}},
		{"key", func(b *topology.Builder) []string {
			b.SetBasicBolt("x", k.BasicBolt, 1).ShuffleGrouping("orders").Output(k.Fields()...)
			return k.Fields()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, spout := exprRunOne(t, []string{"quantity", "order"}, []tuple.Values{{1, "a"}}, 1, nil, c.set)
			if len(got) != 0 {
				t.Errorf("sink got %v, want nothing", got)
			}
			spout.mu.Lock()
			defer spout.mu.Unlock()
			if r := spout.reasons[0]; len(spout.reasons) != 1 || !strings.Contains(r, "[quantity order]") || !strings.Contains(r, "[order quantity]") {
				t.Errorf("failed %v; want the input failed, naming its fields and the bolt's", spout.reasons)
			}
		})
	}
}

// A field is a variable of any type, so expr compiles a call of it, which then
// failed on every input at runtime ("cannot call non-function"): a field named as
// one of expr's functions (len, type, date: the log spout's fields have type) hid
// the function. The call is refused at build, at the field's character.
func TestExprCallOfAFieldRefused(t *testing.T) {
	in := []string{"order", "quantity", "len", "type"}
	for _, c := range []struct {
		expr string
		at   int
		msg  string
	}{
		{"quantity > 0 && len(order) > 0", 16, "len is a field of the input, not a function: calling it fails on every input (the field hides the function len"},
		{"'é' == order || type(quantity) == 'int'", 17, "type is a field of the input"},
		{"quantity(1)", 0, "quantity is a field of the input, not a function: calling it fails on every input"},
	} {
		_, err := builtin.NewFilterBolt(c.expr, in)
		var ee *builtin.ExprError
		if !errors.As(err, &ee) || ee.Offset != c.at || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewFilterBolt(%q): %v; want an *ExprError at byte %d saying %q", c.expr, err, c.at, c.msg)
		}
	}
	// A field so named is still a field, and a WithFunction of a field's name is
	// still the function.
	if _, err := builtin.NewFilterBolt("len > 0 && type == 'x'", in); err != nil {
		t.Errorf("fields named len and type, read: %v", err)
	}
	one := builtin.WithFunction("order", func(...any) (any, error) { return 1, nil })
	if _, err := builtin.NewFilterBolt("order() == 1", in, one); err != nil {
		t.Errorf("a function of a field's name, called: %v", err)
	}
}

// Four tasks of each class share one compiled program (and a WithFunction): each
// task has its own VM and variables, so under -race nothing is shared but what is
// read-only, and every value is the one of its own input.
func TestExprTasksShareTheProgram(t *testing.T) {
	in := []string{"order", "quantity", "payload"}
	double := builtin.WithFunction("double", func(p ...any) (any, error) { return p[0].(int) * 2, nil })
	f, err := builtin.NewFilterBolt(`quantity % 3 != 0 && fromJSON(payload).ok`, in)
	if err != nil {
		t.Fatal(err)
	}
	k, err := builtin.NewKeyBolt(`upper(order)`, f.Fields(), builtin.WithKeyField("sku"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "sku", Expr: "sku"}, {Name: "q", Expr: "double(quantity)"},
		{Name: "env", Expr: `$env.order + ":" + string($env.quantity)`}}, k.Fields(), double)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var vals []tuple.Values
	var want []string
	for i := range n {
		vals = append(vals, tuple.Values{fmt.Sprintf("o%04d", i), i, []byte(fmt.Sprintf(`{"ok": %v}`, i%2 == 0))})
		if i%3 != 0 && i%2 == 0 {
			want = append(want, fmt.Sprintf("O%04d %d o%04d:%d", i, 2*i, i, i))
		}
	}
	got, spout := exprRunOne(t, in, vals, 1, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("f", f.BasicBolt, 4).ShuffleGrouping("orders").Output(f.Fields()...)
		b.SetBasicBolt("k", k.BasicBolt, 4).ShuffleGrouping("f").Output(k.Fields()...)
		b.SetBasicBolt("x", m.BasicBolt, 4).FieldsGrouping("k", "sku").Output(m.Fields()...)
		return m.Fields()
	})
	var seen []string
	for _, g := range got {
		seen = append(seen, fmt.Sprintf("%v %v %v", g...))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Errorf("the sink got %d tuples, want %d; first got %v, want %v", len(seen), len(want), seen[:min(3, len(seen))], want[:3])
	}
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if spout.acked != n || len(spout.reasons) != 0 {
		t.Errorf("acked %d, failed %v; want every tree acked", spout.acked, spout.reasons)
	}
}

// A Map's output named by a YAML key that is not a string (3, true, null) is
// refused saying so, not with Go's printing of a map[interface {}]interface {}.
func TestExprMapNameNotAString(t *testing.T) {
	reg := exprRegistry(t)
	for _, c := range []struct{ key, says string }{{"3", "int 3"}, {"true", "bool true"}, {"null", "null"}} {
		_, err := exprBuild(t, reg, exprFile("gale.bolt.Map", "      - name: fields\n        value:\n          - order: order\n          - "+c.key+": quantity\n"))
		want := "f.yaml:12:13: component \"x\" (class \"gale.bolt.Map\"): invalid spec: property fields: item 1: the name " + c.says + " is not a field name"
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "interface") {
			t.Errorf("name %s: got\n%v\nwant\n%s...", c.key, err, want)
		}
	}
	_, err := exprBuild(t, reg, exprFile("gale.bolt.Map", "      - name: fields\n        value:\n          - {3: order, b: order}\n"))
	if err == nil || !strings.Contains(err.Error(), "got a mapping of 2 keys") {
		t.Errorf("two keys, one not a string: %v", err)
	}
}

// A failure's reason shows at most 80 bytes of a value, cut between characters:
// cut inside one, a value that is not a string (printed unquoted) put invalid
// UTF-8 in the reason.
func TestExprReasonCutBetweenCharacters(t *testing.T) {
	in := []string{"order", "quantity"}
	f, err := builtin.NewFilterBolt("quantity > 0", in)
	if err != nil {
		t.Fatal(err)
	}
	long := []any{"x" + strings.Repeat("é", 60)} // "[xéé...]": é is 2 bytes, byte 77 is inside one
	_, spout := exprRunOne(t, in, []tuple.Values{{"a", long}}, 1, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", f.BasicBolt, 1).ShuffleGrouping("orders").Output(f.Fields()...)
		return f.Fields()
	})
	spout.mu.Lock()
	defer spout.mu.Unlock()
	r := spout.reasons[0]
	if !utf8.ValidString(r) || !strings.Contains(r, "quantity = []interface {} [x"+strings.Repeat("é", 37)+"...)") {
		t.Errorf("reason %q: want valid UTF-8, the value cut after 37 é", r)
	}
}

// An expression bolt reading a stream its source does not declare (a sink's) is
// refused for want of its input's fields, and the stream is said not declared: it
// was not, the bolt's error alone blaming a refused source or a cycle.
func TestExprInputStreamNotDeclared(t *testing.T) {
	_, err := exprBuild(t, exprRegistry(t), `name: t
spouts:
  - id: orders
    className: test.Orders
bolts:
  - id: s
    className: test.Sink
  - id: a
    className: gale.bolt.Filter
    properties:
      - {name: expr, value: quantity > 0}
streams:
  - {from: orders, to: s, grouping: {type: SHUFFLE}}
  - {from: s, to: a, grouping: {type: SHUFFLE}}
`)
	for _, want := range []string{
		`f.yaml:9:16: component "a" (class "gale.bolt.Filter"): invalid spec: the fields of its input are not known: the components it reads were refused, or do not declare the streams it reads`,
		`f.yaml:14:12: stream "default" of "s" is not declared: "s" declares no stream (a sink)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got\n%v\nwant it to say\n%s", err, want)
		}
	}
}

// A Filter over a field that is nil: nil compares with == (passes or not), and an
// order comparison fails the input, saying the field is nil.
func TestExprFilterOverNil(t *testing.T) {
	in := []string{"order", "quantity"}
	for _, c := range []struct {
		expr   string
		passed []tuple.Values
		reason string
	}{
		{"quantity == nil", []tuple.Values{{"a", nil}}, ""},
		{"(quantity ?? 0) > 1", []tuple.Values{{"b", 2}}, ""},
		{"quantity > 1", []tuple.Values{{"b", 2}}, `expression "quantity > 1": invalid operation: <nil> > int (quantity = nil)`},
	} {
		f, err := builtin.NewFilterBolt(c.expr, in)
		if err != nil {
			t.Fatal(err)
		}
		got, spout := exprRunOne(t, in, []tuple.Values{{"a", nil}, {"b", 2}}, 1, nil, func(b *topology.Builder) []string {
			b.SetBasicBolt("x", f.BasicBolt, 1).ShuffleGrouping("orders").Output(f.Fields()...)
			return f.Fields()
		})
		if !slices.EqualFunc(got, c.passed, slices.Equal) {
			t.Errorf("%s: passed %v, want %v", c.expr, got, c.passed)
		}
		spout.mu.Lock()
		if r := spout.reasons[0]; (c.reason == "") != (len(spout.reasons) == 0) || !strings.Contains(r, c.reason) {
			t.Errorf("%s: failed %v, want %q", c.expr, spout.reasons, c.reason)
		}
		spout.mu.Unlock()
	}
}

// A Map across two engines that serialize every emit, over a field of each type the
// codec carries: the value read as it is (one field, no VM), inside a list made by
// the VM, and what fromJSON and arithmetic make (map[string]any, []any, float64,
// nil, int) reach the sink equal, and every tree is acked.
func TestExprMapCarriesEveryCodecType(t *testing.T) {
	in := []string{"i", "v"}
	when := time.Date(2026, 12, 8, 1, 2, 3, 4, time.UTC)
	values := []any{int64(-7), uint64(1) << 63, float32(1.5), []byte("by"), when, nil, []any{"x", 1, nil}, map[string]any{"k": []any{2.5}}, 7, "s", true}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "i", Expr: "i"}, {Name: "v", Expr: "v"}, {Name: "l", Expr: "[v]"},
		{Name: "j", Expr: `fromJSON('{"a": [1, {"b": null}], "c": 2.5}')`}, {Name: "n", Expr: "i * 2"}}, in)
	if err != nil {
		t.Fatal(err)
	}
	var vals []tuple.Values
	for i, v := range values {
		vals = append(vals, tuple.Values{i, v})
	}
	got, spout := exprRunOne(t, in, vals, 2, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", m.BasicBolt, 2).ShuffleGrouping("orders").Output(m.Fields()...)
		return m.Fields()
	}, engine.WithSerialization())
	if len(got) != len(values) {
		t.Fatalf("sink got %d tuples, want %d: %v (failed: %v)", len(got), len(values), got, spout.reasons)
	}
	j := map[string]any{"a": []any{1.0, map[string]any{"b": nil}}, "c": 2.5}
	for _, g := range got {
		i := g[0].(int)
		want := values[i]
		if b, ok := want.([]byte); ok {
			want = string(b) // a []byte field is seen as a string
		}
		same := reflect.DeepEqual(g[1], want)
		if w, ok := want.(time.Time); ok {
			same = w.Equal(g[1].(time.Time))
		}
		if !same || !reflect.DeepEqual(g[2], []any{g[1]}) || !reflect.DeepEqual(g[3], j) || g[4] != 2*i {
			t.Errorf("input %d (%T %v): sink got %#v", i, values[i], values[i], g)
		}
	}
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if spout.acked != len(values) {
		t.Errorf("acked %d, failed %v", spout.acked, spout.reasons)
	}
}

// repeat checks its result's size before making it: expr's makes the string, then
// finds it over the memory budget, so repeat(order, 1000000) over a 100-byte order
// allocated 100 MB (over a 10 kB field, 10 GB: the worker killed) to fail the
// input. Its other uses are expr's.
func TestExprRepeatChecksFirst(t *testing.T) {
	in := []string{"order", "quantity"}
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "r", Expr: "repeat(order, quantity)"}}, in)
	if err != nil {
		t.Fatal(err)
	}
	task := m.BasicBolt()
	if err := task.Prepare(context.Background(), topology.TaskContext{}); err != nil {
		t.Fatal(err)
	}
	src := &tuple.Source{Component: "orders", Stream: "default", Fields: tuple.NewFields(in...)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = task.Execute(tuple.New(src, 1, tuple.Values{strings.Repeat("x", 100), 1000000}), &exprCollector{})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "memory budget exceeded") {
		t.Errorf("repeat of 100 bytes 1000000 times: %v, want the memory budget exceeded", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 10<<20 {
		t.Errorf("failing it allocated %d bytes", grew)
	}
	for _, c := range []struct {
		s    string
		n    any
		want any
	}{{"ab", 3, "ababab"}, {"ab", int64(2), "abab"}, {"ab", 0, ""}, {"é", 2.0, "éé"}} {
		out := &exprCollector{}
		if err := task.Execute(tuple.New(src, 1, tuple.Values{c.s, c.n}), out); err != nil || len(out.got) != 1 || out.got[0][0] != c.want {
			t.Errorf("repeat(%q, %T %v): %v, %v; want %q", c.s, c.n, c.n, out.got, err, c.want)
		}
	}
	if err := task.Execute(tuple.New(src, 1, tuple.Values{"ab", -1}), &exprCollector{}); err == nil || !strings.Contains(err.Error(), "expected positive integer") {
		t.Errorf("repeat(ab, -1): %v", err)
	}
}

// exprCollector keeps what a basic bolt emits.
type exprCollector struct{ got []tuple.Values }

func (c *exprCollector) Emit(v tuple.Values) error                  { c.got = append(c.got, v); return nil }
func (c *exprCollector) EmitTo(_ string, v tuple.Values) error      { c.got = append(c.got, v); return nil }
func (c *exprCollector) EmitDirect(int, string, tuple.Values) error { return nil }
func (c *exprCollector) ResetTimeout() error                        { return nil }
func (c *exprCollector) ReportError(error)                          {}

// A Map reads its input's fields by name, whatever their order on the stream; made
// for no input fields (nil), its expressions may read none, and a Filter so made
// refuses an input that has fields rather than emit them under none.
func TestExprMapReadsByNameAndNilInputFields(t *testing.T) {
	m, err := builtin.NewMapBolt([]builtin.MapField{{Name: "o", Expr: "order"}, {Name: "q", Expr: "quantity * 2"}}, []string{"order", "quantity"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := exprRunOne(t, []string{"quantity", "order"}, []tuple.Values{{2, "a"}}, 1, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", m.BasicBolt, 1).ShuffleGrouping("orders").Output(m.Fields()...)
		return m.Fields()
	})
	if want := []tuple.Values{{"a", 4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("sink got %v, want %v", got, want)
	}
	if _, err := builtin.NewMapBolt([]builtin.MapField{{Name: "o", Expr: "order"}}, nil); !errors.Is(err, builtin.ErrExpression) || !strings.Contains(err.Error(), "unknown name order (the input has no fields)") {
		t.Errorf("NewMapBolt over nil input fields, reading one: %v", err)
	}
	f, err := builtin.NewFilterBolt("true", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, spout := exprRunOne(t, []string{"order"}, []tuple.Values{{"a"}}, 1, nil, func(b *topology.Builder) []string {
		b.SetBasicBolt("x", f.BasicBolt, 1).ShuffleGrouping("orders").Output(f.Fields()...)
		return f.Fields()
	})
	spout.mu.Lock()
	defer spout.mu.Unlock()
	if r := spout.reasons[0]; !strings.Contains(r, "the input from orders has fields [order], the bolt was made for []") {
		t.Errorf("a Filter made for no fields, an input of one: failed %v", spout.reasons)
	}
}
