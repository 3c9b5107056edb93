// Package builtin holds gale's built-in components: the spouts, bolts and sinks a
// Flux file names by class (gale.*), each also a plain Go value for a topology built
// in Go. docs/components.md has the table of classes, options and guarantees.
//
// Expressions: gale.bolt.Filter, gale.bolt.Map and gale.bolt.Key (NewFilterBolt,
// NewMapBolt, NewKeyBolt in Go) evaluate expr (github.com/expr-lang/expr)
// expressions whose variables are the input tuple's fields. They are compiled when
// the topology is built, over the fields of the streams the bolt reads
// (component.Spec.Inputs), so a bad expression is refused at its line and column in
// the file; an input an expression cannot be evaluated on fails alone, with the
// expression and the values in the reason.
package builtin
