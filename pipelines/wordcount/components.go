package wordcount

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// Class names of the word count's spout and bolts for topology files (Storm's
// Flux format, gale run): Components declares them.
const (
	LineSpoutClass     = "gale.wordcount.LineSpout"
	SplitSentenceClass = "gale.wordcount.SplitSentence"
	WordCountClass     = "gale.wordcount.WordCount"
)

// Components declares the word count's spout and bolts as classes a topology file
// names (gale's binary registers them with app.WithComponent), so that a Flux file
// wires the same word count as `gale wordcount`:
//
//	gale.wordcount.LineSpout      spout; constructorArgs: the text files to read
//	                              (one path per argument, relative to the working
//	                              directory). Emits (line, pos), one tracked tuple per
//	                              line; replays a failed line from its offset; a
//	                              topology.FiniteSpout, exhausted once every line is
//	                              acked, so gale run ends by itself. Parallelism 1.
//	gale.wordcount.SplitSentence  basic bolt; emits (word, pos, off) per word of the
//	                              line (Words); property failRate (0) fails lines
//	                              at that rate, to exercise replays.
//	gale.wordcount.WordCount      bolt; consumes SplitSentence's stream with FIELDS
//	                              grouping on word; counts each occurrence once (a
//	                              replayed line counts nothing twice); property
//	                              output (required): the file its counts are written
//	                              to when the run stops, as word<TAB>count lines
//	                              sorted by word (bytewise), as gale wordcount --out
//	                              writes; property failRate (0) as SplitSentence's.
//
// The counts file is written by the last of the component's tasks to stop
// (Cleanup), once, with every task's counts: at the end of a run that every task of
// it ran in one process, as gale run does. It holds what was counted when the run
// stopped: after a run that ended by itself, every word of the files.
func Components() []component.Declaration {
	return []component.Declaration{
		{
			Class: LineSpoutClass, Doc: "reads the text files named by its constructorArgs, one tracked tuple (line, pos) per line; replays failed lines; ends when every line is acked",
			Spout: func(s component.Spec) (func() topology.Spout, error) {
				if len(s.Args) == 0 {
					return nil, &component.SpecError{Arg: -1, Call: -1, Msg: "constructorArgs: name at least one text file to read"}
				}
				var names []string
				for i := range s.Args {
					name, err := s.ArgString(i)
					if err != nil {
						return nil, err
					}
					st, err := os.Stat(name)
					if err == nil && st.IsDir() {
						err = fmt.Errorf("%s is a directory, not a text file", name)
					}
					if err != nil {
						return nil, &component.SpecError{Arg: i, Call: -1, Msg: fmt.Sprintf("constructorArgs[%d]: %v", i, err)}
					}
					names = append(names, name)
				}
				return FilesSpout(LineSpoutClass, names), nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: lineFields}}, nil
			},
		},
		{
			Class: SplitSentenceClass, Doc: "splits the line of gale.wordcount.LineSpout's tuples into words, one tuple (word, pos, off) per word, anchored",
			BasicBolt: func(s component.Spec) (func() topology.BasicBolt, error) {
				f, err := failuresOf(s)
				if err != nil {
					return nil, err
				}
				return NewSplit(SplitConfig{FailRate: f.rate, Seed: f.seed}), nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: splitFields}}, nil
			},
		},
		{
			Class: WordCountClass, Doc: "counts the words of gale.wordcount.SplitSentence's tuples, each occurrence once; writes word<TAB>count lines to property output when the run stops",
			Bolt: func(s component.Spec) (func() topology.Bolt, error) {
				f, err := failuresOf(s)
				if err != nil {
					return nil, err
				}
				if err := s.Require("output"); err != nil {
					return nil, err
				}
				out, err := s.String("output", "")
				if err != nil {
					return nil, err
				}
				if out == "" {
					return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "output", Msg: "property output: empty (name the file the counts are written to)"}
				}
				if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
					return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "output", Msg: fmt.Sprintf("property output: %s: no such directory", filepath.Dir(out))}
				}
				if st, err := os.Stat(out); err == nil && st.IsDir() {
					return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "output", Msg: fmt.Sprintf("property output: %s is a directory: want the file the counts are written to", out)}
				}
				return NewCount(CountConfig{Output: out, FailRate: f.rate, Seed: f.seed}), nil
			},
			// A sink: it emits nothing.
		},
	}
}

// failuresOf reads properties failRate (0) and seed (1) of split and count.
func failuresOf(s component.Spec) (failures, error) {
	rate, err := s.Float("failRate", 0)
	if err != nil {
		return failures{}, err
	}
	if !(rate >= 0 && rate < 1) {
		return failures{}, &component.SpecError{Arg: -1, Call: -1, Prop: "failRate", Msg: fmt.Sprintf("property failRate: %v: must be at least 0 and below 1", rate)}
	}
	seed, err := s.Int("seed", 1)
	if err != nil {
		return failures{}, err
	}
	return failures{rate: rate, seed: uint64(seed)}, nil
}

// fileSpout is the word count's spout for topology files: lineSpout, with the end
// of its input told to the engine (topology.FiniteSpout).
type fileSpout struct {
	lineSpout
	class string // for its errors: LineSpoutClass, or a built-in's
}

func (s *fileSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Parallelism != 1 {
		// Its line ids and low watermark are one sequence, which the count tasks'
		// deduplication (Occurrences) relies on.
		return fmt.Errorf("%s runs as one task: parallelism %d, want 1", s.class, tc.Parallelism)
	}
	return s.lineSpout.Open(ctx, tc, out)
}

// Exhausted implements topology.FiniteSpout: every file was read to its end and
// every line acked (a line lost because its file changed counts as acked; it was
// reported).
func (s *fileSpout) Exhausted() bool {
	return s.eof && s.head == len(s.order) && len(s.replays) == 0
}

// countFile is the count bolt for topology files: its counts go to the
// component's countSink when it stops.
type countFile struct {
	countBolt
	sink *countSink
}

func (b *countFile) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if err := b.countBolt.Prepare(ctx, tc, out); err != nil {
		return err // not started: a task whose Prepare failed is not cleaned up
	}
	b.sink.started(tc.Parallelism)
	return nil
}

func (b *countFile) Cleanup() error {
	if err := b.countBolt.Cleanup(); err != nil {
		return err
	}
	return b.sink.stopped()
}

// countSink gathers the counts of one WordCount component's tasks and writes them
// to path once the last task of the component has stopped.
type countSink struct {
	path    string
	sum     bool // write results.sums, not results.counts
	results results
	mu      sync.Mutex
	tasks   int // the component's parallelism
	starts  int // tasks of this run prepared
	stops   int
	written bool
}

func (c *countSink) started(parallelism int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stops == c.starts {
		// Every task started has stopped (none yet, or an earlier run's, whole or
		// refused at its start): this is a new run of the same factory (a Go
		// program starting its topology again), with counts of its own, written
		// at its own end. Without this, its stops counted on from the earlier
		// run's and its counts file was never written.
		c.starts, c.stops, c.written = 0, 0, false
		c.results.reset()
	}
	c.starts++
	c.tasks = parallelism
}

func (c *countSink) stopped() error {
	c.mu.Lock()
	c.stops++
	last := c.stops == c.tasks && !c.written
	if last {
		c.written = true
	}
	c.mu.Unlock()
	if !last {
		return nil
	}
	c.results.mu.Lock()
	counts, sums := c.results.counts, c.results.sums
	c.results.mu.Unlock()
	if c.sum {
		return writeSumsFile(c.path, sums)
	}
	return writeCountsFile(c.path, counts)
}

// writeCountsFile writes word<TAB>count lines sorted by word (bytewise), through a
// temporary file renamed into place: a reader sees the whole file or none.
func writeCountsFile(path string, counts map[string]uint64) error {
	return writeKeyed(path, counts, func(w *bufio.Writer, n uint64) { w.WriteString(strconv.FormatUint(n, 10)) })
}

// writeSumsFile is writeCountsFile for sums: key<TAB>sum, the sum in the fewest
// digits that read back as the same float64 (an integral sum without a point).
func writeSumsFile(path string, sums map[string]float64) error {
	return writeKeyed(path, sums, func(w *bufio.Writer, v float64) { w.WriteString(strconv.FormatFloat(v, 'f', -1, 64)) })
}

// keyEscaper escapes a key as the tsv line format does (\\ \t \n \r), so that a
// key holding a tab or a line end (a JSON element's, say) stays one field of one
// line; a word has none of them, so gale wordcount's files are unchanged.
var keyEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

func writeKeyed[V any](path string, m map[string]V, value func(*bufio.Writer, V)) error {
	words := make([]string, 0, len(m))
	for w := range m {
		words = append(words, w)
	}
	slices.Sort(words)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write counts: %w", err)
	}
	defer os.Remove(tmp.Name())
	_ = tmp.Chmod(0o644) // as os.Create would make it (CreateTemp makes 0600)
	w := bufio.NewWriter(tmp)
	for _, word := range words {
		keyEscaper.WriteString(w, word)
		w.WriteByte('\t')
		value(w, m[word])
		w.WriteByte('\n')
	}
	err = w.Flush()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write counts to %s: %w", path, err)
	}
	return nil
}
