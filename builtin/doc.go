// Package builtin holds gale's built-in components: the spouts, bolts and sinks a
// Flux file names by class (gale.*), each also a plain Go value for a topology built
// in Go. docs/components.md has the table of classes, options and guarantees.
package builtin
