package wordcount

// Word count's spout and bolts as the pieces package builtin's classes are made
// of (gale.spout.Files, gale.bolt.Split, gale.bolt.Count, gale.bolt.Sum): one
// implementation for gale wordcount, its gale.wordcount.* classes and the
// built-ins, so that a Flux file of built-ins runs the code gale wordcount runs.
// The options are checked by the caller (builtin); these only assemble.

import (
	"slices"

	"github.com/gale-stream/gale/topology"
)

// LineFields are the files spout's fields: line (string) and pos ([]uint64:
// line_id, low), as the package doc says.
func LineFields() []string { return slices.Clone(lineFields) }

// FilesSpout returns the factory of a files spout over names (read in order):
// one tracked tuple (line, pos) per line, a failed line replayed from its offset,
// a topology.FiniteSpout exhausted once every line is acked. It runs as one task
// (its line ids are one sequence, which Occurrences relies on): Open refuses
// another parallelism, naming class.
func FilesSpout(class string, names []string) func() topology.Spout {
	names = slices.Clone(names)
	return func() topology.Spout {
		return &fileSpout{lineSpout: lineSpout{names: slices.Clone(names), p: &progress{done: make(chan struct{})}}, class: class}
	}
}

// SplitConfig configures a split bolt (NewSplit).
type SplitConfig struct {
	// Field is the input field split ("" is "line"), JSON whether it holds a JSON
	// array whose elements are the pieces (JSONElements) rather than words (Words).
	Field string
	JSON  bool
	// FailRate fails lines at that rate (seeded by Seed per task), to exercise
	// replays.
	FailRate float64
	Seed     uint64
}

// NewSplit returns the factory of a split bolt: per piece of the field, one tuple
// (piece, pos, off) anchored to the line, off its byte offset in the field, so
// that pos's line_id+off names the occurrence.
func NewSplit(c SplitConfig) func() topology.BasicBolt {
	f := failures{rate: c.FailRate, seed: c.Seed}
	return func() topology.BasicBolt { return &splitBolt{failures: f, field: c.Field, json: c.JSON} }
}

// CountConfig configures a count or sum bolt (NewCount).
type CountConfig struct {
	// Key is the field counted by ("" is "word"); Value, if set, the field whose
	// numbers are summed per key instead (Number).
	Key, Value string
	// Output is the file the counts (or sums) are written to, key<TAB>value lines
	// sorted by key, once the last of the component's tasks has stopped.
	Output string
	// Untracked: the topology runs without acker tasks, so nothing is replayed
	// and no occurrence is deduplicated (the spout's low watermark means nothing).
	Untracked bool
	// FailRate and Seed are as SplitConfig's.
	FailRate float64
	Seed     uint64
}

// NewCount returns the factory of a count (or sum) bolt: each occurrence (the
// tuple's pos line_id plus its off, 0 without an off field) applied once, the
// counts kept in memory and written to Output when the run stops.
func NewCount(c CountConfig) func() topology.Bolt {
	f := failures{rate: c.FailRate, seed: c.Seed}
	sink := &countSink{path: c.Output, sum: c.Value != ""}
	return func() topology.Bolt {
		return &countFile{countBolt: countBolt{failures: f, key: c.Key, value: c.Value, tracked: !c.Untracked, results: &sink.results}, sink: sink}
	}
}
