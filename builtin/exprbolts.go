package builtin

import (
	"context"
	"fmt"
	"slices"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The class names of the expression bolts.
const (
	FilterBoltClass = "gale.bolt.Filter"
	MapBoltClass    = "gale.bolt.Map"
	KeyBoltClass    = "gale.bolt.Key"
)

// FilterBolt passes on the inputs for which a boolean expression over their fields is
// true, unchanged and anchored to them, and acks every input: true or false. An
// input the expression cannot be evaluated on (a field of another type than the
// expression takes, a result that is no bool) is failed with the reason, naming
// the component, the expression and the values it read; the task goes on.
//
// In Go:
//
//	f, err := builtin.NewFilterBolt("quantity > 0", []string{"order", "quantity"})
//	...
//	b.SetBasicBolt("positive", f.BasicBolt, 2).ShuffleGrouping("orders").Output(f.Fields()...)
type FilterBolt struct {
	p      *exprProgram
	fields []string
}

// NewFilterBolt compiles expression over an input whose fields are inputFields (the
// expression's variables, of any type). A syntax error, a name that is not a
// field, or a result that cannot be a bool is an *ExprError.
func NewFilterBolt(expression string, inputFields []string, opts ...ExprOption) (*FilterBolt, error) {
	o, err := exprOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	if err := tuple.NewFields(inputFields...).Validate(); err != nil {
		return nil, fmt.Errorf("%w: input fields: %w", ErrExprOption, err)
	}
	p, err := exprCompile(expression, inputFields, true, o)
	if err != nil {
		return nil, err
	}
	return &FilterBolt{p: p, fields: slices.Clone(inputFields)}, nil
}

// Fields are the fields of what it emits: its input's.
func (f *FilterBolt) Fields() []string { return slices.Clone(f.fields) }

// BasicBolt returns a new task of the filter (a factory for Builder.SetBasicBolt).
func (f *FilterBolt) BasicBolt() topology.BasicBolt { return &exprFilterTask{f: f} }

type exprFilterTask struct {
	f   *FilterBolt
	env *exprEnv
}

func (t *exprFilterTask) Prepare(context.Context, topology.TaskContext) error {
	t.env = newExprEnv(t.f.p)
	t.env.pass = append([]string{}, t.f.fields...)
	return nil
}

func (t *exprFilterTask) Execute(in *tuple.Tuple, out topology.BasicCollector) error {
	if err := t.env.load(in); err != nil {
		return fmt.Errorf("%s: %w", FilterBoltClass, err)
	}
	v, err := t.env.run(0)
	if err != nil {
		return t.env.runError(FilterBoltClass, t.f.p, err)
	}
	pass, ok := v.(bool)
	if !ok {
		return t.env.runError(FilterBoltClass, t.f.p, fmt.Errorf("the result is %T %v, not a bool", v, v))
	}
	if pass {
		return out.Emit(in.Values())
	}
	return nil
}

func (t *exprFilterTask) Cleanup() error { return nil }

// MapField is one output field of a Map: its name and the expression of its value.
type MapField struct {
	Name string
	Expr string
}

// MapBolt emits, for each input, one tuple whose fields are given by expressions over
// the input's fields, anchored to the input, and acks the input. An input one of
// the expressions cannot be evaluated on is failed with the reason (the
// component, the expression, the values it read); the task goes on.
//
// In Go:
//
//	m, err := builtin.NewMapBolt([]builtin.MapField{{"order", "fromJSON(payload).order"}, {"qty", "int(fromJSON(payload).qty)"}}, ingest.SpoutFields)
//	...
//	b.SetBasicBolt("parse", m.BasicBolt, 2).ShuffleGrouping("log").Output(m.Fields()...)
type MapBolt struct {
	names []string
	progs []*exprProgram
}

// NewMapBolt compiles each output's expression over an input whose fields are
// inputFields. An output name that is empty or given twice is an error wrapping
// ErrExprOption; an expression that does not compile an *ExprError, wrapped with
// the output's name.
func NewMapBolt(outputs []MapField, inputFields []string, opts ...ExprOption) (*MapBolt, error) {
	m, _, err := exprNewMapBolt(outputs, inputFields, opts)
	return m, err
}

// newMap is NewMapBolt that also says which output is at fault (-1: none of them).
func exprNewMapBolt(outputs []MapField, inputFields []string, opts []ExprOption) (*MapBolt, int, error) {
	o, err := exprOptionsOf(opts)
	if err != nil {
		return nil, -1, err
	}
	if err := tuple.NewFields(inputFields...).Validate(); err != nil {
		return nil, -1, fmt.Errorf("%w: input fields: %w", ErrExprOption, err)
	}
	if len(outputs) == 0 {
		return nil, -1, fmt.Errorf("%w: a map needs at least one output field", ErrExprOption)
	}
	m := &MapBolt{}
	for i, f := range outputs {
		if err := tuple.NewFields(append(slices.Clone(m.names), f.Name)...).Validate(); err != nil {
			return nil, i, fmt.Errorf("%w: output %d: %w", ErrExprOption, i, err)
		}
		p, err := exprCompile(f.Expr, inputFields, false, o)
		if err != nil {
			return nil, i, fmt.Errorf("output %q: %w", f.Name, err)
		}
		m.names, m.progs = append(m.names, f.Name), append(m.progs, p)
	}
	return m, -1, nil
}

// Fields are the fields of what it emits: the outputs' names, in order.
func (m *MapBolt) Fields() []string { return slices.Clone(m.names) }

// BasicBolt returns a new task of the map (a factory for Builder.SetBasicBolt).
func (m *MapBolt) BasicBolt() topology.BasicBolt { return &exprMapTask{m: m} }

type exprMapTask struct {
	m   *MapBolt
	env *exprEnv
}

func (t *exprMapTask) Prepare(context.Context, topology.TaskContext) error {
	t.env = newExprEnv(t.m.progs...)
	return nil
}

func (t *exprMapTask) Execute(in *tuple.Tuple, out topology.BasicCollector) error {
	if err := t.env.load(in); err != nil {
		return fmt.Errorf("%s: %w", MapBoltClass, err)
	}
	vals := make(tuple.Values, len(t.m.progs))
	for i, p := range t.m.progs {
		v, err := t.env.run(i)
		if err == nil {
			err = t.env.carriable(v)
		}
		if err != nil {
			return t.env.runError(MapBoltClass, p, err)
		}
		vals[i] = v
	}
	return out.Emit(vals)
}

func (t *exprMapTask) Cleanup() error { return nil }

// KeyBolt emits each input with one more field, its key, given by an expression over
// the input's fields, anchored to the input, and acks the input: a FIELDS grouping
// on the key can follow. An input the expression cannot be evaluated on is failed
// with the reason; the task goes on.
//
// In Go:
//
//	k, err := builtin.NewKeyBolt("fromJSON(payload).stock_code", ingest.SpoutFields, builtin.WithKeyField("sku"))
//	...
//	b.SetBasicBolt("key", k.BasicBolt, 2).ShuffleGrouping("log").Output(k.Fields()...)
//	b.SetBolt("count", count, 4).FieldsGrouping("key", "sku")
type KeyBolt struct {
	p      *exprProgram
	fields []string
}

// NewKeyBolt compiles expression over an input whose fields are inputFields. The key
// field is "key" unless WithKeyField names another; it must not be an input field.
func NewKeyBolt(expression string, inputFields []string, opts ...ExprOption) (*KeyBolt, error) {
	o, err := exprOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	if err := tuple.NewFields(inputFields...).Validate(); err != nil {
		return nil, fmt.Errorf("%w: input fields: %w", ErrExprOption, err)
	}
	if slices.Contains(inputFields, o.keyField) {
		return nil, fmt.Errorf("%w: key field %q is a field of the input already (its fields: %v): name another", ErrExprOption, o.keyField, inputFields)
	}
	p, err := exprCompile(expression, inputFields, false, o)
	if err != nil {
		return nil, err
	}
	return &KeyBolt{p: p, fields: append(slices.Clone(inputFields), o.keyField)}, nil
}

// Fields are the fields of what it emits: its input's, then the key.
func (k *KeyBolt) Fields() []string { return slices.Clone(k.fields) }

// BasicBolt returns a new task of the key extraction (a factory for
// Builder.SetBasicBolt).
func (k *KeyBolt) BasicBolt() topology.BasicBolt { return &exprKeyTask{k: k} }

type exprKeyTask struct {
	k   *KeyBolt
	env *exprEnv
}

func (t *exprKeyTask) Prepare(context.Context, topology.TaskContext) error {
	t.env = newExprEnv(t.k.p)
	t.env.pass = append([]string{}, t.k.fields[:len(t.k.fields)-1]...)
	return nil
}

func (t *exprKeyTask) Execute(in *tuple.Tuple, out topology.BasicCollector) error {
	if err := t.env.load(in); err != nil {
		return fmt.Errorf("%s: %w", KeyBoltClass, err)
	}
	v, err := t.env.run(0)
	if err == nil {
		err = t.env.carriable(v)
	}
	if err != nil {
		return t.env.runError(KeyBoltClass, t.k.p, err)
	}
	vals := make(tuple.Values, 0, in.Len()+1)
	return out.Emit(append(append(vals, in.Values()...), v))
}

func (t *exprKeyTask) Cleanup() error { return nil }
