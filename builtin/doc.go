// Package builtin holds gale's built-in components: the spouts, bolts and sinks a
// Flux file names by class (gale.*), each also a plain Go value for a topology built
// in Go. docs/components.md has the table of classes, options and guarantees.
//
// Every class checks its options in its maker, when the topology is built (gale run,
// gale submit --file, gale serve --pipeline), through component.Spec's readers, so a
// bad option is a component.SpecError placed at its property in the file, never a
// runtime failure. The Go values check the same options in their constructors.
//
// Word count's parts: gale.spout.Files, gale.bolt.Split, gale.bolt.Count and
// gale.bolt.Sum are the spout and bolts of pipelines/wordcount (what gale wordcount
// runs), wrapped as classes: one tracked tuple per line, replayed from its file
// offset; each piece named by its occurrence (line position, offset) so that count
// and sum take each occurrence once however often a line is replayed. On a cluster
// (component.Spec.Cluster) the spout's acked prefix is committed to KV and the
// counts go to a JetStream changelog, so a worker killed mid-run loses nothing.
//
// Sources and sinks: the Kafka and JetStream spouts and sinks are connect/'s, the SQL
// sink is package sink's (insert-once, versioned upsert), and the file and stdout
// sinks are for trying things (at least once: a replay writes its line again). A URL
// holding a secret is refused in clear: it is given by reference (env:NAME, @PATH)
// and resolved when each task starts, because a topology file travels to every
// worker through the cluster's KV.
//
// Expressions: gale.bolt.Filter, gale.bolt.Map and gale.bolt.Key (NewFilterBolt,
// NewMapBolt, NewKeyBolt in Go) evaluate expr (github.com/expr-lang/expr)
// expressions whose variables are the input tuple's fields. They are compiled when
// the topology is built, over the fields of the streams the bolt reads
// (component.Spec.Inputs), so a bad expression is refused at its line and column in
// the file; an input an expression cannot be evaluated on fails alone, with the
// expression and the values in the reason.
package builtin
