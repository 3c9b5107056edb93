package builtin

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// exprComponents declares the expression bolts for Flux files. Each compiles its
// expressions in its maker, when the topology is built, over the fields of the
// streams it reads (Spec.Inputs): a bad expression is refused at its line and
// column in the file (SpecError.At), never at runtime.
func exprComponents() []component.Declaration {
	return []component.Declaration{
		{
			Class: FilterBoltClass,
			Doc:   "passes on, anchored, the inputs for which property expr (a boolean expression over their fields) is true; acks every input",
			BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
				f, err := exprFilterOf(s)
				if err != nil {
					return nil, err
				}
				return f.BasicBolt, nil
			},
			Outputs: func(s component.Spec) ([]component.Output, error) {
				fields, err := exprInputs(s)
				if err != nil {
					return nil, err
				}
				return []component.Output{{Fields: fields}}, nil
			},
		},
		{
			Class: MapBoltClass,
			Doc:   "emits, anchored, one tuple per input whose fields are given by property fields ([name: expression, ...]) over the input's fields",
			BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
				m, err := exprMapOf(s)
				if err != nil {
					return nil, err
				}
				return m.BasicBolt, nil
			},
			Outputs: func(s component.Spec) ([]component.Output, error) {
				outs, err := exprMapFields(s)
				if err != nil {
					return nil, err
				}
				names := make([]string, len(outs))
				for i, o := range outs {
					names[i] = o.Name
				}
				return []component.Output{{Fields: names}}, nil
			},
		},
		{
			Class: KeyBoltClass,
			Doc:   "emits, anchored, each input with one more field (property field, default key) given by property expr over its fields, for a FIELDS grouping",
			BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
				k, err := exprKeyOf(s)
				if err != nil {
					return nil, err
				}
				return k.BasicBolt, nil
			},
			Outputs: func(s component.Spec) ([]component.Output, error) {
				fields, err := exprInputs(s)
				if err != nil {
					return nil, err
				}
				key, err := s.String("field", "key")
				if err != nil {
					return nil, err
				}
				return []component.Output{{Fields: append(fields, key)}}, nil
			},
		},
	}
}

// exprInputs are the fields of the streams the bolt reads, which must be the same
// list for every stream: the expression is compiled once over them, and a
// filter's output is its input.
func exprInputs(s component.Spec) ([]string, error) {
	if len(s.Inputs) == 0 {
		return nil, &component.SpecError{Arg: -1, Call: -1, Msg: "the fields of its input are not known: the components it reads were refused, or do not declare the streams it reads (its expression is over the fields of the streams it reads)"}
	}
	first := s.Inputs[0]
	for _, in := range s.Inputs[1:] {
		if !slices.Equal(in.Fields, first.Fields) {
			return nil, &component.SpecError{Arg: -1, Call: -1, Msg: fmt.Sprintf("the streams it reads declare different fields: stream %q of %q [%s], stream %q of %q [%s] (an expression bolt reads streams of the same fields)",
				first.Stream, first.Component, strings.Join(first.Fields, ", "), in.Stream, in.Component, strings.Join(in.Fields, ", "))}
		}
	}
	return slices.Clone(first.Fields), nil
}

// exprProp reads property key, a required expression (a non-empty string).
func exprProp(s component.Spec, key string) (string, error) {
	if err := s.Require(key); err != nil {
		return "", err
	}
	src, err := s.String(key, "")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(src) == "" {
		return "", &component.SpecError{Arg: -1, Call: -1, Prop: key, Msg: fmt.Sprintf("property %s: the expression is empty", key)}
	}
	return src, nil
}

// exprPlaced turns a compile error of the expression in property prop (at path
// within its value) into a SpecError at the character at fault.
func exprPlaced(err error, prop string, path []any, what string) error {
	var ee *ExprError
	if !errors.As(err, &ee) {
		return &component.SpecError{Arg: -1, Call: -1, Prop: prop, Path: path, Msg: fmt.Sprintf("property %s: %v", prop, err)}
	}
	line, col := exprLineCol(ee.Expr, ee.Offset)
	return &component.SpecError{Arg: -1, Call: -1, Prop: prop, Path: path, At: ee.Offset + 1,
		Msg: fmt.Sprintf("property %s: %s %q, at its %d:%d: %s", prop, what, ee.Expr, line, col, ee.Msg)}
}

func exprFilterOf(s component.Spec) (*FilterBolt, error) {
	src, err := exprProp(s, "expr")
	if err != nil {
		return nil, err
	}
	fields, err := exprInputs(s)
	if err != nil {
		return nil, err
	}
	f, err := NewFilterBolt(src, fields)
	if err != nil {
		return nil, exprPlaced(err, "expr", nil, "expression")
	}
	return f, nil
}

// exprMapFields reads property fields: a list of one-key mappings, name: expression,
// in the order of the output's fields (a YAML mapping would lose the order).
func exprMapFields(s component.Spec) ([]MapField, error) {
	if err := s.Require("fields"); err != nil {
		return nil, err
	}
	v, _ := s.Prop("fields")
	bad := func(path []any, format string, a ...any) error {
		return &component.SpecError{Arg: -1, Call: -1, Prop: "fields", Path: path, Msg: "property fields: " + fmt.Sprintf(format, a...)}
	}
	const want = "want a list of one-key mappings, each name: expression (- qty: int(fromJSON(payload).quantity))"
	list, ok := v.([]any)
	if !ok {
		return nil, bad(nil, "%s, got %s", want, exprDescribe(v))
	}
	if len(list) == 0 {
		return nil, bad(nil, "empty: a map emits at least one field (%s)", want)
	}
	var outs []MapField
	seen := map[string]int{}
	for i, item := range list {
		if m, ok := item.(map[any]any); ok && len(m) == 1 { // YAML's key 3, true, null
			for k := range m {
				return nil, bad([]any{i}, "item %d: the name %s is not a field name (%s)", i, exprDescribe(k), want)
			}
		}
		m, ok := item.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, bad([]any{i}, "item %d: %s, got %s", i, want, exprDescribe(item))
		}
		for name, e := range m {
			src, ok := e.(string)
			if !ok {
				return nil, bad([]any{i, name}, "item %d (%s): want an expression (a string; quote a YAML literal such as true or 3), got %s", i, name, exprDescribe(e))
			}
			if err := tuple.NewFields(name).Validate(); err != nil {
				return nil, bad([]any{i}, "item %d: %q is not a field name: %v", i, name, err)
			}
			if j, ok := seen[name]; ok {
				return nil, bad([]any{i}, "item %d: field %q is given twice (first as item %d)", i, name, j)
			}
			seen[name] = i
			outs = append(outs, MapField{Name: name, Expr: src})
		}
	}
	return outs, nil
}

func exprMapOf(s component.Spec) (*MapBolt, error) {
	outs, err := exprMapFields(s)
	if err != nil {
		return nil, err
	}
	fields, err := exprInputs(s)
	if err != nil {
		return nil, err
	}
	m, i, err := exprNewMapBolt(outs, fields, nil)
	if err != nil {
		if i < 0 {
			return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "fields", Msg: "property fields: " + err.Error()}
		}
		var ee *ExprError
		if !errors.As(err, &ee) { // the name is at fault
			return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "fields", Path: []any{i}, Msg: fmt.Sprintf("property fields: item %d: %v", i, err)}
		}
		return nil, exprPlaced(err, "fields", []any{i, outs[i].Name}, fmt.Sprintf("item %d (%s): expression", i, outs[i].Name))
	}
	return m, nil
}

func exprKeyOf(s component.Spec) (*KeyBolt, error) {
	src, err := exprProp(s, "expr")
	if err != nil {
		return nil, err
	}
	key, err := s.String("field", "key")
	if err != nil {
		return nil, err
	}
	fields, err := exprInputs(s)
	if err != nil {
		return nil, err
	}
	if err := tuple.NewFields(key).Validate(); err != nil {
		return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "field", Msg: fmt.Sprintf("property field: %q is not a field name: %v", key, err)}
	}
	if slices.Contains(fields, key) {
		return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "field", Msg: fmt.Sprintf("property field: %q is a field of the input already (its fields: %s): name the key another way", key, strings.Join(fields, ", "))}
	}
	k, err := NewKeyBolt(src, fields, WithKeyField(key))
	if err != nil {
		var ee *ExprError
		if !errors.As(err, &ee) {
			return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "field", Msg: "property field: " + err.Error()}
		}
		return nil, exprPlaced(err, "expr", nil, "expression")
	}
	return k, nil
}

// exprDescribe says what a file gave, for an error.
func exprDescribe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		return fmt.Sprintf("a mapping of %d keys", len(x))
	case map[any]any:
		return fmt.Sprintf("a mapping of %d keys", len(x))
	}
	return fmt.Sprintf("%T %v", v, v)
}
