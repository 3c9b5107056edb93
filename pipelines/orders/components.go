package orders

import (
	"strings"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// ParseClass is the parse bolt as a component class, for a pipeline file (gale
// serve --pipeline FILE.yaml) reading the log spout: it emits LineFields for an
// order line and fails anything else (ErrNotOrderLine: a replay cannot help).
const ParseClass = "gale.orders.Parse"

// Components are the orders pipeline's classes that a topology or pipeline file
// may name: gale's binary registers them (app.WithComponent).
func Components() []component.Declaration {
	return []component.Declaration{{
		Class: ParseClass,
		Doc:   "reads an order line event from the log spout and emits its fields: " + strings.Join(LineFields, ", "),
		BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
			o := &Options{Counters: &Counters{}}
			return func() topology.BasicBolt { return &parseBolt{o: o} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: LineFields}}, nil
		},
	}}
}
