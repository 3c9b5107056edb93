package builtin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gale-stream/gale/builtin"
)

// Each expression class's bad options are refused at build, each with its place
// in the file and what is wrong.
func TestExprBadOptions(t *testing.T) {
	reg := exprRegistry(t)
	for _, c := range []struct {
		name, class, props string
		at, msg            string
	}{
		{"filter without expr", "gale.bolt.Filter", "      - name: exp\n        value: quantity > 0\n",
			"f.yaml:7:16: ", `property "expr" is required`},
		{"filter expr misspelt", "gale.bolt.Filter", "      - name: expr\n        value: quantity > 0\n      - name: fields\n        value: [a]\n",
			"f.yaml:11:15: ", `property "fields" is not used`},
		{"filter expr not a string", "gale.bolt.Filter", "      - name: expr\n        value: true\n",
			"f.yaml:9:15: ", `property "expr": want a string, got bool true`},
		{"filter expr empty", "gale.bolt.Filter", "      - name: expr\n        value: \"  \"\n",
			"f.yaml:9:15: ", `property expr: the expression is empty`},
		{"map without fields", "gale.bolt.Map", "      - name: expr\n        value: order\n",
			"f.yaml:7:16: ", `property "fields" is required`},
		{"map fields not a list", "gale.bolt.Map", "      - name: fields\n        value: {order: order}\n",
			"f.yaml:9:15: ", `property fields: want a list of one-key mappings`},
		{"map fields empty", "gale.bolt.Map", "      - name: fields\n        value: []\n",
			"f.yaml:9:15: ", `property fields: empty`},
		{"map item not a mapping", "gale.bolt.Map", "      - name: fields\n        value:\n          - order\n",
			"f.yaml:11:13: ", `property fields: item 0: want a list of one-key mappings`},
		{"map item of two keys", "gale.bolt.Map", "      - name: fields\n        value:\n          - {a: order, b: order}\n",
			"f.yaml:11:13: ", `item 0: want a list of one-key mappings, each name: expression`},
		{"map expression not a string", "gale.bolt.Map", "      - name: fields\n        value:\n          - one: 1\n",
			"f.yaml:11:18: ", `item 0 (one): want an expression (a string; quote a YAML literal such as true or 3), got int 1`},
		{"map field twice", "gale.bolt.Map", "      - name: fields\n        value:\n          - a: order\n          - a: quantity\n",
			"f.yaml:12:13: ", `property fields: item 1: field "a" is given twice (first as item 0)`},
		{"key field an input field", "gale.bolt.Key", "      - name: expr\n        value: order\n      - name: field\n        value: quantity\n",
			"f.yaml:11:15: ", `property field: "quantity" is a field of the input already`},
		{"key field not a string", "gale.bolt.Key", "      - name: expr\n        value: order\n      - name: field\n        value: [k]\n",
			"f.yaml:11:15: ", `property "field": want a string, got a list of 1`},
		{"key field not a name", "gale.bolt.Key", "      - name: expr\n        value: order\n      - name: field\n        value: \"\"\n",
			"f.yaml:11:15: ", `property field: "" is not a field name`},
		{"key without expr", "gale.bolt.Key", "      - name: field\n        value: k\n",
			"f.yaml:7:16: ", `property "expr" is required`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := exprBuild(t, reg, exprFile(c.class, c.props))
			if err == nil {
				t.Fatal("built; want refused")
			}
			if !strings.HasPrefix(err.Error(), c.at) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got\n%v\nwant at %q, saying %q", err, c.at, c.msg)
			}
		})
	}
}

// An expression bolt reads streams of one list of fields: its expression is
// compiled once over them.
func TestExprBadInputs(t *testing.T) {
	reg := exprRegistry(t)
	_, err := exprBuild(t, reg, `name: t
spouts:
  - id: orders
    className: test.Orders
  - id: other
    className: test.Other
bolts:
  - id: x
    className: gale.bolt.Filter
    properties:
      - name: expr
        value: order == 'a'
streams:
  - from: orders
    to: x
    grouping: {type: SHUFFLE}
  - from: other
    to: x
    grouping: {type: SHUFFLE}
`)
	want := `f.yaml:9:16: component "x" (class "gale.bolt.Filter"): invalid spec: the streams it reads declare different fields: stream "default" of "orders" [order, quantity, payload], stream "default" of "other" [id]`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("two inputs of different fields: got\n%v\nwant\n%s", err, want)
	}
}

// The Go constructors refuse what the classes refuse, with errors wrapping
// ErrExpression (an *ExprError at the character for a bad expression).
func TestExprGoConstructorsRefuse(t *testing.T) {
	in := []string{"order", "quantity"}
	_, err := builtin.NewFilterBolt("quantity >> 1", in)
	var ee *builtin.ExprError
	if !errors.As(err, &ee) || ee.Offset != 10 || !errors.Is(err, builtin.ErrExpression) {
		t.Errorf("NewFilterBolt(bad syntax): %v; want an *ExprError at byte 10", err)
	}
	if _, err := builtin.NewFilterBolt("quantity", in); err != nil {
		t.Errorf("NewFilterBolt(quantity): %v; a field may hold a bool (checked per input)", err)
	}
	if _, err := builtin.NewFilterBolt("1 + 1", in); !errors.Is(err, builtin.ErrExpression) || !strings.Contains(err.Error(), "expected bool, but got int") {
		t.Errorf("NewFilterBolt(1 + 1): %v; want refused, not a bool", err)
	}
	if _, err := builtin.NewFilterBolt("order != ''", []string{"order", "order"}); !errors.Is(err, builtin.ErrExprOption) {
		t.Errorf("NewFilterBolt(input fields twice): %v", err)
	}
	if _, err := builtin.NewMapBolt(nil, in); !errors.Is(err, builtin.ErrExprOption) {
		t.Errorf("NewMapBolt(no outputs): %v", err)
	}
	_, err = builtin.NewMapBolt([]builtin.MapField{{Name: "a", Expr: "order"}, {Name: "b", Expr: "qty"}}, in)
	if !errors.As(err, &ee) || ee.Offset != 0 || !strings.Contains(err.Error(), `output "b"`) || !strings.Contains(err.Error(), "unknown name qty") {
		t.Errorf("NewMapBolt(unknown field): %v", err)
	}
	if _, err := builtin.NewKeyBolt("order", in, builtin.WithKeyField("order")); !errors.Is(err, builtin.ErrExprOption) {
		t.Errorf("NewKeyBolt(key field an input field): %v", err)
	}
	if _, err := builtin.NewKeyBolt("order", in, builtin.WithFunction("f", nil)); !errors.Is(err, builtin.ErrExprOption) {
		t.Errorf("NewKeyBolt(nil function): %v", err)
	}
}

// A bolt whose source was refused is refused too, saying why its expression
// cannot be checked, beside the source's own error.
func TestExprSourceRefused(t *testing.T) {
	_, err := exprBuild(t, exprRegistry(t), `name: t
spouts:
  - id: orders
    className: test.Ordres
bolts:
  - id: x
    className: gale.bolt.Filter
    properties:
      - name: expr
        value: quantity > 0
streams:
  - from: orders
    to: x
    grouping: {type: SHUFFLE}
`)
	for _, want := range []string{
		`f.yaml:4:16: "orders": unknown class "test.Ordres"`,
		`f.yaml:7:16: component "x" (class "gale.bolt.Filter"): invalid spec: the fields of its input are not known: the components it reads were refused`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got\n%v\nwant it to say\n%s", err, want)
		}
	}
}
