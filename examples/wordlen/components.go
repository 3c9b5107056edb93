package main

// The spout and bolt classes of wordlen, registered by class name: the topology
// (topology.go) is built from them through a component.Registry, as a topology
// file (Storm's Flux format) naming the same classes would be.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Class names.
const (
	LinesClass  = "wordlen.Lines"
	CountClass  = "wordlen.Count"
	AppendClass = "wordlen.Append"
	// AppendCountsClass appends (word, count) pairs: the sink of
	// testdata/shell-wordcount.yaml, whose spout and bolts are Node and Python.
	AppendCountsClass = "wordlen.AppendCounts"
)

// declarations are the classes this binary offers: main registers each with
// app.WithComponent (gale components lists them), and the topology's factory
// finds them in env.Components.
func declarations() []component.Declaration {
	return []component.Declaration{{
		Class: LinesClass,
		Doc:   "emits each non-blank line of the file named by constructorArgs[0] (an absolute path) once, replaying failed ones",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			path, err := absArg(s, "the input file")
			if err != nil {
				return nil, err
			}
			// Only the path here: the maker runs in the submitter too, and the file
			// is read in Open, by whichever worker runs the spout.
			return func() topology.Spout { return &linesSpout{path: path} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"line", "text"}}}, nil
		},
	}, {
		Class: CountClass,
		Doc:   "counts the words and letters of each line",
		BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
			return func() topology.BasicBolt { return &countBolt{} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"line", "words", "letters"}}}, nil
		},
	}, {
		Class: AppendClass,
		Doc:   "appends LINE WORDS LETTERS to the file named by constructorArgs[0] (an absolute path): a demonstration sink, not idempotent",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			path, err := absArg(s, "the output file")
			if err != nil {
				return nil, err
			}
			return func() topology.Bolt { return &appendBolt{path: path, fields: "line, words, letters", n: 3} }, nil
		},
	}, {
		Class: AppendCountsClass,
		Doc:   "appends WORD COUNT to the file named by constructorArgs[0] (an absolute path) for each (word, count) in: a running count is written each time it grows, so the last or highest line of a word is its count",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			path, err := absArg(s, "the output file")
			if err != nil {
				return nil, err
			}
			return func() topology.Bolt { return &appendBolt{path: path, fields: "word, count", n: 2} }, nil
		},
	}}
}

// absArg reads constructorArgs[0] as an absolute path: the task may run in another
// process, started in another directory.
func absArg(s component.Spec, what string) (string, error) {
	path, err := s.ArgString(0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%s %q: not an absolute path (its task may run in another process, in another directory)", what, path)
	}
	return path, nil
}

// Count returns the words (runs of non-space) and letters (Unicode letters, so a
// curly quote is not one) of text.
func Count(text string) (words, letters int) {
	for _, r := range text {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	return len(strings.Fields(text)), letters
}

// line is one non-blank line of the input: its number in the file (from 1) and
// its text without the line ending.
type line struct {
	num  int
	text string
}

// linesSpout emits each non-blank line once, its number as the message id, and
// emits a failed line again. At the end of the file it is idle: the topology runs
// until it is killed, as a submitted topology does.
type linesSpout struct {
	topology.BaseSpout
	path   string
	lines  []line
	next   int   // index in lines of the next line never emitted
	replay []int // line numbers failed, to emit again
	byNum  map[int]string
}

func (s *linesSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if err := s.BaseSpout.Open(ctx, tc, out); err != nil {
		return err
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return err
	}
	s.byNum = map[int]string{}
	for i, text := range strings.Split(string(b), "\n") {
		text = strings.TrimSuffix(text, "\r")
		if i == 0 {
			text = strings.TrimPrefix(text, "\uFEFF") // a byte-order mark
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		s.lines = append(s.lines, line{num: i + 1, text: text})
		s.byNum[i+1] = text
	}
	return nil
}

func (s *linesSpout) NextTuple() {
	if len(s.replay) > 0 {
		n := s.replay[0]
		if s.Out.Emit(tuple.Values{n, s.byNum[n]}, n) == nil {
			s.replay = s.replay[1:]
		}
		return
	}
	if s.next < len(s.lines) {
		l := s.lines[s.next]
		if s.Out.Emit(tuple.Values{l.num, l.text}, l.num) == nil {
			s.next++
		}
	}
}

// Fail queues the line to be emitted again (at-least-once: a line whose tree
// failed after the sink wrote it is written twice).
func (s *linesSpout) Fail(msgID any) {
	if n, ok := msgID.(int); ok {
		s.replay = append(s.replay, n)
	}
}

// countBolt emits each line's number with its counts; the input is acked when
// Execute returns (a basic bolt).
type countBolt struct{ topology.BaseBasicBolt }

func (b *countBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	n, ok := t.ValueByField("line").(int)
	if !ok {
		return fmt.Errorf("line %v: not an int", t.ValueByField("line"))
	}
	words, letters := Count(t.StringByField("text"))
	return out.Emit(tuple.Values{n, words, letters})
}

// appendBolt appends its input's n values, space-separated, as a line to its file
// ("LINE WORDS LETTERS" for wordlen.Append, "WORD COUNT" for wordlen.AppendCounts)
// for each input, and acks it once written. One task with global grouping writes it, each line with one
// write(2) on a file opened O_APPEND.
//
// It is a demonstration: a line replayed after it was written is written again,
// so the file may hold a line twice (the example's test reads it that way). A real
// sink must be idempotent, writing each result once however often it arrives:
// gale's sink package does that in a database, keyed by an id (see pipeline.go).
// The example writes a file so that its topology can be seen working with nothing
// but a text editor, and so that its test can read what it did.
type appendBolt struct {
	topology.BaseBolt
	path   string
	fields string // what the values are, for an error
	n      int    // how many values an input has
	f      *os.File
}

func (b *appendBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if err := b.BaseBolt.Prepare(ctx, tc, out); err != nil {
		return err
	}
	f, err := os.OpenFile(b.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	b.f = f
	return nil
}

func (b *appendBolt) Execute(t *tuple.Tuple) {
	vals := t.Values()
	if len(vals) != b.n {
		_ = b.Out.FailWith(t, fmt.Errorf("want %d values (%s), got %d", b.n, b.fields, len(vals)))
		return
	}
	var line []byte
	for i, v := range vals {
		if i > 0 {
			line = append(line, ' ')
		}
		line = fmt.Append(line, v)
	}
	if _, err := b.f.Write(append(line, '\n')); err != nil {
		_ = b.Out.FailWith(t, err)
		return
	}
	_ = b.Out.Ack(t)
}

func (b *appendBolt) Cleanup() error {
	if b.f == nil {
		return nil // Prepare failed
	}
	return b.f.Close()
}
