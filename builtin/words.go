package builtin

// The word count's pieces: a files spout, split, and key-grouped count and sum,
// each a class for Flux files and a Go value for topologies built in Go.
// They are word count's own spout and bolts (pipelines/wordcount's pieces), so a
// Flux file of them runs the code gale wordcount runs, with its guarantees: one
// tracked tuple per line, replayed from its offset on a fail; each occurrence
// (line position + offset) applied once by the count, so a replayed line counts
// nothing twice; on a cluster, the spout's committed offset (the contiguous acked
// prefix) and the count's changelog in JetStream, so that either resumes on
// another worker.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Class names of the word-count pieces.
const (
	FilesSpoutClass = "gale.spout.Files"
	SplitBoltClass  = "gale.bolt.Split"
	CountBoltClass  = "gale.bolt.Count"
	SumBoltClass    = "gale.bolt.Sum"
)

// FilesSpout is gale.spout.Files as a Go value (NewFilesSpout): Spout is the
// factory to give the builder, Fields its stream's fields.
type FilesSpout struct{ factory func() topology.Spout }

// Spout makes one task's spout.
func (s *FilesSpout) Spout() topology.Spout {
	if s.factory == nil {
		return zeroPiece{"FilesSpout", "NewFilesSpout"}
	}
	return s.factory()
}

// Fields are the spout's fields: line, pos.
func (s *FilesSpout) Fields() []string { return wordcount.LineFields() }

// SplitBolt is gale.bolt.Split as a Go value (NewSplitBolt).
type SplitBolt struct {
	factory func() topology.BasicBolt
	fields  []string
}

// BasicBolt makes one task's bolt.
func (s *SplitBolt) BasicBolt() topology.BasicBolt {
	if s.factory == nil {
		return zeroBasic{zeroPiece{"SplitBolt", "NewSplitBolt"}}
	}
	return s.factory()
}

// Fields are the bolt's fields: the piece's (word by default), pos, off.
func (s *SplitBolt) Fields() []string { return slices.Clone(s.fields) }

// CountBolt is gale.bolt.Count or gale.bolt.Sum as a Go value (NewCountBolt,
// NewSumBolt): a sink, which emits nothing.
type CountBolt struct{ factory func() topology.Bolt }

// Bolt makes one task's bolt.
func (c *CountBolt) Bolt() topology.Bolt {
	if c.factory == nil {
		return zeroPiece{"CountBolt", "NewCountBolt or NewSumBolt"}
	}
	return c.factory()
}

// zeroPiece is the task of a piece's zero value (not made by its constructor):
// it refuses to start, naming the constructor, where calling its nil factory
// crashed the process in engine.Start. As a spout and a bolt; zeroBasic as a
// basic bolt.
type zeroPiece struct{ typ, ctor string }

func (z zeroPiece) err() error {
	return fmt.Errorf("builtin: a zero %s, made by no constructor: make it with %s", z.typ, z.ctor)
}

func (z zeroPiece) Open(context.Context, topology.TaskContext, topology.SpoutCollector) error {
	return z.err()
}

func (z zeroPiece) Prepare(context.Context, topology.TaskContext, topology.OutputCollector) error {
	return z.err()
}

func (z zeroPiece) NextTuple()           {}
func (z zeroPiece) Ack(any)              {}
func (z zeroPiece) Fail(any)             {}
func (z zeroPiece) Close() error         { return nil }
func (z zeroPiece) Execute(*tuple.Tuple) {}
func (z zeroPiece) Cleanup() error       { return nil }

type zeroBasic struct{ zeroPiece }

func (z zeroBasic) Prepare(context.Context, topology.TaskContext) error { return z.err() }
func (z zeroBasic) Execute(*tuple.Tuple, topology.BasicCollector) error { return z.err() }

// WordsOption configures NewFilesSpout, NewSplitBolt, NewCountBolt and
// NewSumBolt; each refuses an option that is not its own, naming it.
type WordsOption func(*wordsOptions)

// wordsOptions are every piece's settings; set records which were given (by
// their Flux property names), for the constructors' refusals.
type wordsOptions struct {
	field, mode, as, key string
	failRate             float64
	seed                 uint64
	untracked            bool
	cluster              *component.Cluster
	set                  []string
}

func (o *wordsOptions) mark(name string) { o.set = append(o.set, name) }

// WithSplitField is the field Split reads (default "line", the files spout's).
func WithSplitField(name string) WordsOption {
	return func(o *wordsOptions) { o.field = name; o.mark("field") }
}

// WithSplitJSON makes Split read the field as a JSON array whose elements are the
// pieces, rather than words (Flux: mode: json).
func WithSplitJSON() WordsOption { return func(o *wordsOptions) { o.mode = "json"; o.mark("mode") } }

// WithSplitAs names Split's piece field (default "word", "element" with WithSplitJSON).
func WithSplitAs(name string) WordsOption {
	return func(o *wordsOptions) { o.as = name; o.mark("as") }
}

// WithCountKey is the field Count and Sum group by (default "word").
func WithCountKey(name string) WordsOption {
	return func(o *wordsOptions) { o.key = name; o.mark("key") }
}

// WithInjectedFailures makes Split fail lines, and Count and Sum occurrences they have
// not applied, at rate (0 <= rate < 1), seeded by seed per task: replays, to see
// that the result stays exact.
func WithInjectedFailures(rate float64, seed uint64) WordsOption {
	return func(o *wordsOptions) { o.failRate, o.seed = rate, seed; o.mark("failRate") }
}

// WithoutAckers tells Count and Sum that the topology runs without acker tasks
// (Config.Ackers 0): nothing is replayed, and no occurrence is deduplicated.
func WithoutAckers() WordsOption {
	return func(o *wordsOptions) { o.untracked = true; o.mark("ackers") }
}

// WithClusterState makes Files and Count keep their state in the cluster's
// JetStream (a files spout's committed offsets, a count's changelog), so that
// each resumes on another worker; a Flux file gets it from its worker.
func WithClusterState(c component.Cluster) WordsOption {
	return func(o *wordsOptions) { o.cluster = &c; o.mark("cluster") }
}

// optError is a bad option: prop is its Flux property ("" for the constructor's
// arguments), msg says what is wrong.
type optError struct {
	prop, msg string
	arg       int // a constructorArgs position, or -1
}

func (e *optError) Error() string { return e.msg }

func badProp(prop, format string, a ...any) *optError {
	return &optError{prop: prop, arg: -1, msg: fmt.Sprintf("property "+prop+": "+format, a...)}
}

// specError places e for a Flux file.
func specError(e *optError) error {
	return &component.SpecError{Arg: e.arg, Call: -1, Prop: e.prop, Msg: e.msg}
}

// goError names the constructor for a Go caller, and the option as an option.
func goError(class string, e *optError) error {
	return fmt.Errorf("%s: %s", class, strings.Replace(e.msg, "property ", "option ", 1))
}

// onlyOptions refuses the options given that are not among allowed.
func (o *wordsOptions) only(class string, allowed ...string) error {
	for _, s := range o.set {
		if !slices.Contains(allowed, s) {
			var names []string
			for _, a := range allowed {
				names = append(names, optionName[a])
			}
			return fmt.Errorf("%s: %s is not one of its options (%s)", class, optionName[s], strings.Join(names, ", "))
		}
	}
	return nil
}

// optionName is each option's function, by the name set records.
var optionName = map[string]string{"field": "WithSplitField", "mode": "WithSplitJSON", "as": "WithSplitAs", "key": "WithCountKey",
	"failRate": "WithInjectedFailures", "ackers": "WithoutAckers", "cluster": "WithClusterState"}

// emptySet refuses an option given as "" (WithSplitField(""), say): its default is
// had by leaving it out.
func (o *wordsOptions) emptySet() *optError {
	for _, name := range o.set {
		v, ok := map[string]string{"field": o.field, "as": o.as, "key": o.key}[name]
		if ok && v == "" {
			return badProp(name, `"": a field name (leave the option out for its default)`)
		}
	}
	return nil
}

func apply(opts []WordsOption) *wordsOptions {
	o := &wordsOptions{seed: 1}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// NewFilesSpout is gale.spout.Files: the lines of the files (paths or glob patterns,
// read in the order given, a pattern's matches sorted), one tracked tuple (line,
// pos) per line, a failed line replayed from its offset; a topology.FiniteSpout,
// exhausted once every line is acked. It runs as one task. Options:
// WithClusterState.
func NewFilesSpout(paths []string, opts ...WordsOption) (*FilesSpout, error) {
	o := apply(opts)
	if err := o.only(FilesSpoutClass, "cluster"); err != nil {
		return nil, err
	}
	names, bad := filesOf(paths, o.cluster != nil)
	if bad != nil {
		return nil, goError(FilesSpoutClass, bad)
	}
	return &FilesSpout{factory: filesFactory(names, o)}, nil
}

// filesOf expands and checks the spout's paths: each names a regular file or is a
// pattern matching at least one; on a cluster each is absolute (the spout may run
// on any worker, in another directory).
func filesOf(paths []string, onCluster bool) ([]string, *optError) {
	if len(paths) == 0 {
		return nil, &optError{arg: -1, msg: "constructorArgs: name at least one text file to read"}
	}
	var names []string
	for i, p := range paths {
		bad := func(format string, a ...any) *optError {
			return &optError{arg: i, msg: fmt.Sprintf("constructorArgs[%d] %q: ", i, p) + fmt.Sprintf(format, a...)}
		}
		if p == "" {
			return nil, bad("an empty path")
		}
		if onCluster && !filepath.IsAbs(p) {
			return nil, bad("not an absolute path: on a cluster the spout may run on any worker, in another directory")
		}
		matches := []string{p}
		if strings.ContainsAny(p, "*?[") {
			m, err := filepath.Glob(p)
			if err != nil {
				return nil, bad("%v", err)
			}
			if len(m) == 0 {
				return nil, bad("matches no file")
			}
			matches = m // sorted by Glob
		}
		for _, name := range matches {
			st, err := os.Stat(name)
			if err != nil {
				return nil, bad("%v", err)
			}
			if !st.Mode().IsRegular() {
				return nil, bad("%s is not a regular file", name)
			}
			names = append(names, name)
		}
	}
	if len(names) >= 1<<24 {
		return nil, &optError{arg: -1, msg: fmt.Sprintf("constructorArgs: %d files, at most %d", len(names), 1<<24-1)}
	}
	return names, nil
}

func filesFactory(names []string, o *wordsOptions) func() topology.Spout {
	if c := o.cluster; c != nil {
		return wordcount.ClusterFilesSpout(FilesSpoutClass, names, clusterState(c))
	}
	return wordcount.FilesSpout(FilesSpoutClass, names)
}

func clusterState(c *component.Cluster) wordcount.ClusterState {
	return wordcount.ClusterState{JS: c.JS, Bucket: wordcount.ClusterBucket(c.Prefix), Run: "flux-" + c.Topology, Generation: c.Generation}
}

// NewSplitBolt is gale.bolt.Split: per piece of a field of its input (the words of a
// line, Unicode letters and digits lowercased as gale wordcount splits them; or the
// elements of a JSON array), one tuple (piece, pos, off) anchored to its input,
// where pos is the files spout's and off the piece's byte offset in the field:
// pos's line id + off names the occurrence. Options: WithSplitField, WithSplitJSON,
// WithSplitAs, WithInjectedFailures.
func NewSplitBolt(opts ...WordsOption) (*SplitBolt, error) {
	o := apply(opts)
	if err := o.only(SplitBoltClass, "field", "mode", "as", "failRate"); err != nil {
		return nil, err
	}
	if bad := o.emptySet(); bad != nil {
		return nil, goError(SplitBoltClass, bad)
	}
	if bad := o.checkSplit(); bad != nil {
		return nil, goError(SplitBoltClass, bad)
	}
	return &SplitBolt{factory: o.splitFactory(), fields: []string{o.as, "pos", "off"}}, nil
}

func (o *wordsOptions) checkSplit() *optError {
	if o.mode == "" {
		o.mode = "words"
	}
	if o.mode != "words" && o.mode != "json" {
		return badProp("mode", "%q: want words (the words of a line) or json (the elements of a JSON array)", o.mode)
	}
	if o.field == "" {
		o.field = "line"
	}
	if o.as == "" {
		o.as = map[string]string{"words": "word", "json": "element"}[o.mode]
	}
	if bad := checkField("field", o.field); bad != nil {
		return bad
	}
	if bad := checkField("as", o.as); bad != nil {
		return bad
	}
	if o.as == "pos" || o.as == "off" {
		return badProp("as", "%q is a field split emits already (piece, pos, off): name the piece otherwise", o.as)
	}
	return o.checkFailRate()
}

func (o *wordsOptions) splitFactory() func() topology.BasicBolt {
	return wordcount.NewSplit(wordcount.SplitConfig{Field: o.field, JSON: o.mode == "json", FailRate: o.failRate, Seed: o.seed})
}

func checkField(prop, name string) *optError {
	if name == "" || strings.TrimSpace(name) != name {
		return badProp(prop, "%q: a field name, without spaces around it", name)
	}
	return nil
}

func (o *wordsOptions) checkFailRate() *optError {
	if !(o.failRate >= 0 && o.failRate < 1) { // also refuses NaN
		return badProp("failRate", "%v: must be at least 0 and below 1", o.failRate)
	}
	if o.untracked && o.failRate > 0 {
		// Without acker tasks a failed line is not replayed: it is lost, and the
		// counts silently short.
		return badProp("failRate", "%v: injected failures need acker tasks (topology.acker.executors > 0): without them a failed line is lost, not replayed", o.failRate)
	}
	return nil
}

// NewCountBolt is gale.bolt.Count: the occurrences of each value of its key field,
// grouped by it (wire it with FIELDS grouping on the key), each occurrence (pos's
// line id + off; + 0 without an off field, so once per line) counted once however
// often its line is replayed; the counts are written to output, key<TAB>count lines
// sorted by key, when the run stops (in one process: gale run), or, on a cluster
// (WithClusterState), by its first task once the files spout upstream has every line
// acked. Options: WithCountKey, WithInjectedFailures, WithoutAckers, WithClusterState.
func NewCountBolt(output string, opts ...WordsOption) (*CountBolt, error) {
	o := apply(opts)
	if err := o.only(CountBoltClass, "key", "failRate", "ackers", "cluster"); err != nil {
		return nil, err
	}
	if bad := o.emptySet(); bad != nil {
		return nil, goError(CountBoltClass, bad)
	}
	if bad := o.checkCount(output, ""); bad != nil {
		return nil, goError(CountBoltClass, bad)
	}
	return &CountBolt{factory: o.countFactory(output, "")}, nil
}

// NewSumBolt is gale.bolt.Sum: Count's, summing the numbers of field value per key
// (a number, or a string holding one; another value is reported and left out),
// written as key<TAB>sum lines. Options as Count's.
func NewSumBolt(value, output string, opts ...WordsOption) (*CountBolt, error) {
	o := apply(opts)
	if err := o.only(SumBoltClass, "key", "failRate", "ackers", "cluster"); err != nil {
		return nil, err
	}
	if bad := o.emptySet(); bad != nil {
		return nil, goError(SumBoltClass, bad)
	}
	if bad := checkField("value", value); bad != nil {
		return nil, goError(SumBoltClass, bad)
	}
	if bad := o.checkCount(output, value); bad != nil {
		return nil, goError(SumBoltClass, bad)
	}
	return &CountBolt{factory: o.countFactory(output, value)}, nil
}

func (o *wordsOptions) checkCount(output, value string) *optError {
	if o.key == "" {
		o.key = "word"
	}
	if bad := checkField("key", o.key); bad != nil {
		return bad
	}
	for _, f := range []string{"pos", "off"} {
		if o.key == f || value == f {
			return badProp(map[bool]string{true: "key", false: "value"}[o.key == f], "%q is the occurrence's identity, not a field to count or sum", f)
		}
	}
	if value != "" && value == o.key {
		return badProp("value", "%q is the key too", value)
	}
	if output == "" {
		return badProp("output", "empty (name the file the results are written to)")
	}
	if o.cluster != nil {
		if !filepath.IsAbs(output) {
			return badProp("output", "%q: not an absolute path: on a cluster the file is written by whichever worker runs the first task", output)
		}
		if o.untracked {
			return badProp("output", "a count on a cluster needs acker tasks (topology.acker.executors > 0): an occurrence is acked once stored")
		}
	} else if st, err := os.Stat(filepath.Dir(output)); err != nil || !st.IsDir() {
		return badProp("output", "%s: no such directory", filepath.Dir(output))
	} else if st, err := os.Stat(output); err == nil && st.IsDir() {
		// Else the run would end by failing to rename its results onto it.
		return badProp("output", "%s is a directory: want the file the results are written to", output)
	}
	return o.checkFailRate()
}

func (o *wordsOptions) countFactory(output, value string) func() topology.Bolt {
	c := wordcount.CountConfig{Key: o.key, Value: value, Output: output, Untracked: o.untracked, FailRate: o.failRate, Seed: o.seed}
	if o.cluster != nil {
		return wordcount.ClusterCount(c, clusterState(o.cluster))
	}
	return wordcount.NewCount(c)
}

// wordComponents declares the pieces for Flux files; each maker reads the Spec
// into the options the Go constructors take, and checks them as they do.
func wordComponents() []component.Declaration {
	return []component.Declaration{
		{
			Class: FilesSpoutClass,
			Doc:   "the lines of text files (constructorArgs: paths or glob patterns), one tracked tuple (line, pos) per line; replays a failed line; ends when every line is acked; on a cluster resumes at its committed offset",
			Spout: func(s component.Spec) (func() topology.Spout, error) {
				var paths []string
				for i := range s.Args {
					p, err := s.ArgString(i)
					if err != nil {
						return nil, err
					}
					paths = append(paths, p)
				}
				names, bad := filesOf(paths, s.Cluster != nil)
				if bad != nil {
					return nil, specError(bad)
				}
				return filesFactory(names, &wordsOptions{cluster: s.Cluster}), nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: wordcount.LineFields()}}, nil
			},
		},
		{
			Class: SplitBoltClass,
			Doc:   "per word of a field (or element of a JSON array: mode json), one tuple (piece, pos, off) naming the occurrence; properties field, mode, as",
			BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
				o, err := splitSpec(s)
				return o.splitFactory(), err
			},
			Outputs: func(s component.Spec) ([]component.Output, error) {
				o, err := splitSpec(s)
				return []component.Output{{Fields: []string{o.as, "pos", "off"}}}, err
			},
		},
		{
			Class: CountBoltClass,
			Doc:   "counts each occurrence of its key field once (FIELDS grouping on the key); writes key<TAB>count lines to property output at the end",
			Bolt:  func(s component.Spec) (func() topology.Bolt, error) { return countSpec(s, false) },
		},
		{
			Class: SumBoltClass,
			Doc:   "sums field value per key, each occurrence once (FIELDS grouping on the key); writes key<TAB>sum lines to property output at the end",
			Bolt:  func(s component.Spec) (func() topology.Bolt, error) { return countSpec(s, true) },
		},
	}
}

// splitSpec reads Split's properties.
func splitSpec(s component.Spec) (*wordsOptions, error) {
	o := &wordsOptions{}
	var err error
	if o.field, err = s.String("field", ""); err != nil {
		return o, err
	}
	if o.mode, err = s.String("mode", ""); err != nil {
		return o, err
	}
	if o.as, err = s.String("as", ""); err != nil {
		return o, err
	}
	if err := failuresSpec(s, o); err != nil {
		return o, err
	}
	o.untracked = noAckers(s)
	if bad := emptyGiven(s, "field", "mode", "as"); bad != nil {
		return o, specError(bad)
	}
	if bad := o.checkSplit(); bad != nil {
		return o, specError(bad)
	}
	// A field the input lacks would fail every line at runtime, replayed for ever.
	return o, s.NeedInputFields("field", o.field)
}

// emptyGiven refuses a property the file gives as "": its default is had by
// leaving it out.
func emptyGiven(s component.Spec, keys ...string) *optError {
	for _, k := range keys {
		if v, ok := s.Properties[k]; ok && v == "" {
			return badProp(k, `"": a field name (leave the property out for its default)`)
		}
	}
	return nil
}

func failuresSpec(s component.Spec, o *wordsOptions) error {
	var err error
	if o.failRate, err = s.Float("failRate", 0); err != nil {
		return err
	}
	seed, err := s.Int("seed", 1)
	if err != nil {
		return err
	}
	if seed < 0 {
		return specError(badProp("seed", "%d: must be at least 0", seed))
	}
	o.seed = uint64(seed)
	return nil
}

// noAckers reports whether the file's config runs no acker tasks
// (topology.acker.executors: 0).
func noAckers(s component.Spec) bool {
	switch n := s.Config["topology.acker.executors"].(type) { // as YAML or JSON gives it
	case int:
		return n == 0
	case float64:
		return n == 0
	}
	return false
}

// countSpec reads Count's and Sum's properties. Without acker tasks (the file's
// topology.acker.executors: 0) nothing is replayed and occurrences are not
// deduplicated: the spout's low watermark then says nothing.
func countSpec(s component.Spec, sum bool) (func() topology.Bolt, error) {
	o := &wordsOptions{cluster: s.Cluster, untracked: noAckers(s)}
	var err error
	if o.key, err = s.String("key", ""); err != nil {
		return nil, err
	}
	req := []string{"output"}
	if sum {
		req = append(req, "value")
	}
	if err := s.Require(req...); err != nil {
		return nil, err
	}
	output, err := s.String("output", "")
	if err != nil {
		return nil, err
	}
	var value string
	if sum {
		if value, err = s.String("value", ""); err != nil {
			return nil, err
		}
		if bad := checkField("value", value); bad != nil {
			return nil, specError(bad)
		}
	}
	if err := failuresSpec(s, o); err != nil {
		return nil, err
	}
	if bad := emptyGiven(s, "key"); bad != nil {
		return nil, specError(bad)
	}
	if bad := o.checkCount(output, value); bad != nil {
		return nil, specError(bad)
	}
	// A key or value the input lacks would fail every tuple at runtime, replayed
	// for ever; pos names the occurrence.
	if err := s.NeedInputFields("key", o.key); err != nil {
		return nil, err
	}
	if sum {
		if err := s.NeedInputFields("value", value); err != nil {
			return nil, err
		}
	}
	for _, in := range s.Inputs {
		if !slices.Contains(in.Fields, "pos") {
			return nil, &component.SpecError{Arg: -1, Call: -1, Msg: fmt.Sprintf("stream %q of %q has no field pos (its fields: %s): %s reads each tuple's occurrence from pos (and off), as gale.spout.Files and gale.bolt.Split emit them",
				in.Stream, in.Component, strings.Join(in.Fields, ", "), map[bool]string{false: CountBoltClass, true: SumBoltClass}[sum])}
		}
	}
	return o.countFactory(output, value), nil
}
