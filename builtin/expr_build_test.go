package builtin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
)

// exprFile is a topology of the test spout, one expression bolt whose properties
// are props (indented as list items of properties:), and a sink.
func exprFile(class, props string) string {
	return `name: t
spouts:
  - id: orders
    className: test.Orders
bolts:
  - id: x
    className: ` + class + `
    properties:
` + props + `  - id: sink
    className: test.Sink
streams:
  - from: orders
    to: x
    grouping: {type: SHUFFLE}
  - from: x
    to: sink
    grouping: {type: SHUFFLE}
`
}

// A bad expression is refused when the topology is built, at the line and column
// of the character at fault inside the expression in the file, whatever the
// scalar's style: plain, single- or double-quoted, a literal block (|) or a folded
// one (>); in a Map, inside the list of fields.
func TestExprRefusedAtItsCharacter(t *testing.T) {
	reg := exprRegistry(t)
	for _, c := range []struct {
		name, class, props string
		at, msg            string // "f.yaml:LINE:COL: ", what the message says
	}{
		{"plain, unexpected end", "gale.bolt.Filter",
			"      - name: expr\n        value: quantity >\n",
			"f.yaml:10:25: ", "unexpected token EOF"},
		{"plain, unknown field", "gale.bolt.Filter",
			"      - name: expr\n        value: quantity > 0 && colour == 1\n",
			"f.yaml:10:32: ", "unknown name colour (the input's fields: order, quantity, payload)"},
		{"double-quoted, after an escape", "gale.bolt.Filter",
			"      - name: expr\n        value: \"order == \\\"a\\\" && colour\"\n",
			"f.yaml:10:35: ", "unknown name colour"},
		{"single-quoted, after ''", "gale.bolt.Filter",
			"      - name: expr\n        value: 'order == ''a'' && colour'\n",
			"f.yaml:10:35: ", "unknown name colour"},
		{"literal block, second line", "gale.bolt.Filter",
			"      - name: expr\n        value: |\n          quantity > 0 &&\n            colour == 1\n",
			"f.yaml:12:13: ", "unknown name colour"},
		{"folded block, second line", "gale.bolt.Filter",
			"      - name: expr\n        value: >\n          quantity > 0 &&\n          colour == 1\n",
			"f.yaml:12:11: ", "unknown name colour"},
		{"filter result not a bool", "gale.bolt.Filter",
			"      - name: expr\n        value: \"quantity > 0 ? 'big' : 'small'\"\n",
			"f.yaml:10:17: ", "expected bool, but got string"},
		{"a type error", "gale.bolt.Filter",
			"      - name: expr\n        value: order == 'a' && 'x' + 1 > 0\n",
			"f.yaml:10:36: ", "mismatched types string and int"},
		{"map, second field", "gale.bolt.Map",
			"      - name: fields\n        value:\n          - order: order\n          - qty: int(fromJSON(payload).quantity) +\n",
			"f.yaml:12:50: ", "item 1 (qty): expression"},
		{"map, flow style", "gale.bolt.Map",
			"      - name: fields\n        value: [{order: order}, {qty: \"quantity * price\"}]\n",
			"f.yaml:10:51: ", "unknown name price"},
		{"key", "gale.bolt.Key",
			"      - name: expr\n        value: fromJSON(payload).stock_code + skew\n",
			"f.yaml:10:47: ", "unknown name skew"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := exprBuild(t, reg, exprFile(c.class, c.props))
			if err == nil {
				t.Fatal("built; want refused")
			}
			if !strings.HasPrefix(err.Error(), c.at) || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, component.ErrSpec) {
				t.Errorf("got\n%v\nwant at %q, saying %q (and wrapping ErrSpec)", err, c.at, c.msg)
			}
		})
	}
}
