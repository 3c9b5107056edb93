// Package wordcount is gale's main job, behind `gale wordcount`: count the words
// of text files with Storm's reliable processing, exactly, even when bolts fail and
// lines are replayed.
//
//	lines (spout, 1 task) --shuffle--> split (2 tasks) --fields(word)--> count (2 tasks)
//
// The spout reads files lazily (one buffered line at a time) and emits each line as a
// tracked tuple whose message id names the file and byte offset. split emits one tuple
// per word anchored to the line; count adds it to its counts. A failed or timed-out
// line is read again from its offset and re-emitted. Count tasks apply each word
// occurrence at most once (see Occurrences), so the final counts are exact.
//
// Tuples carry only plain values (strings and integers, which the tuple codec encodes
// without registration), so that the tasks could run in separate processes:
//
//	lines:  line (string: the text), pos ([]uint64 of two: line_id, the OccurrenceID
//	        of the text's first byte, and low, the spout's low watermark when this
//	        attempt was emitted)
//	split:  word (string), pos (the line's, one slice shared by its words), off
//	        (int: the word's byte offset in the line; line_id+off is the
//	        occurrence's OccurrenceID)
//
// Each task keeps its state in its own bolt or spout value. The one thing that leaves
// the tasks is the final counts: each count task hands its own counts to the run's
// results in Cleanup, when it stops, and Run reads them after every task has stopped.
// In a multi-process run that hand-off is the topology's sink. (The spout's progress
// counters and end signal are read by Run too: the spout reads the input files, so it
// runs in Run's process.)
//
// # Cluster mode
//
// NewClusterTopology builds the same topology (same shape, so the same fingerprint)
// for tasks spread over worker processes, any of which may die and have its tasks
// started again elsewhere; its state lives in JetStream, not in the tasks
// (cluster.go, changelog.go). The spout commits its low watermark (every line before
// it acked) to key "<Run>.lines" of KV bucket Bucket, off its task goroutine, with a
// compare-and-set on the revision it last read or wrote, so a stale incarnation is
// refused; a spout starting elsewhere resumes reading at the committed low. Each
// count task appends the occurrences it applies, in batches, to its own subject
// "wordcount.changelog.<Bucket>.<Run>.<task index>" of stream "<Bucket>-changelog",
// and rebuilds its Occurrences (what it has applied) from that subject when it
// starts; it keeps no per-word counts, which are read from the changelogs.
// The counts are exactly once: a count task acks an occurrence only once the batch
// holding it (its first application, for a duplicate) is stored, so every line
// below a committed low has all its occurrences in the changelogs, and every other
// line is read again by the spout; an occurrence stored twice (by a stale task, or
// a write whose answer was lost) is dropped by its occurrence id, when a task
// restores and when ReadClusterCounts sums the changelogs.
package wordcount

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// LinePos is the message id of a line: it stays in the spout task (the runtime hands
// it back to Ack or Fail) and never travels in a tuple, whose field pos carries ID
// and Low. ID is OccurrenceID(file, offset of the line's text), Low the
// spout's low watermark when this attempt was emitted.
type LinePos struct {
	ID  uint64
	Low uint64
	// Len and Sum (FNV-1a) of the line's text, so that a replay can tell that the file
	// changed under it instead of counting different text.
	Len, Sum uint32
}

// String names the line as file number:byte offset ("2:35664"): the same for every
// attempt of the line, so the UI and logs show replays under one message id.
func (p *LinePos) String() string { return fmt.Sprintf("%d:%d", p.ID>>40, p.ID&(1<<40-1)) }

// checksum is 32-bit FNV-1a (as hash/fnv's New32a), inline so that it costs no
// allocation per line.
func checksum(text string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(text); i++ {
		h = (h ^ uint32(text[i])) * 16777619
	}
	return h
}

// errInjected is the failure injected by --fail-rate.
var errInjected = errors.New("wordcount: injected failure (--fail-rate)")

// lineFields are the fields of the spout's stream (see the package doc).
var lineFields = []string{"line", "pos"}

// progress is what the spout tells Run while it runs: lines read, acked, replayed and
// lost, and done, closed when every line is acked. The spout has one task and runs in
// Run's process (it reads the files); no bolt sees it.
type progress struct {
	lines, acked, replays, lost atomic.Uint64
	doneOnce                    sync.Once
	done                        chan struct{}
}

func (p *progress) finish() { p.doneOnce.Do(func() { close(p.done) }) }

// lineSpout reads the files in order and replays failed lines from their offsets.
type lineSpout struct {
	names []string // the files to read, in order
	p     *progress
	out   topology.SpoutCollector
	files []*os.File
	cur   int // index of the file being read
	rd    *bufio.Reader
	off   int64 // offset of the next line in files[cur]
	eof   bool
	// order holds the ids of lines emitted and not yet acked, in input order; acked
	// marks those acked out of order. order[0] is the low watermark.
	order   []uint64
	head    int
	acked   map[uint64]bool
	replays []LinePos
	line    []byte

	// Cluster mode (cluster.go) only. start is the low watermark to resume from, an
	// OccurrenceID (0: the beginning): Open seeks there. lowMoved, if set, is called
	// on the task goroutine each time the low watermark advances, with the new one.
	start    uint64
	lowMoved func(low uint64)
	lowSeen  uint64
}

func (s *lineSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	s.acked = map[uint64]bool{}
	for _, name := range s.names {
		f, err := os.Open(name)
		if err != nil {
			s.Close()
			return fmt.Errorf("wordcount: %w", err)
		}
		s.files = append(s.files, f)
	}
	if len(s.files) > 0 {
		s.rd = bufio.NewReaderSize(s.files[0], 64<<10)
	} else {
		s.eof = true
	}
	if s.start > 0 {
		if err := s.seek(s.start); err != nil {
			s.Close()
			return fmt.Errorf("wordcount: resume at %d:%d: %w", s.start>>40, s.start&(1<<40-1), err)
		}
	}
	s.lowSeen = s.low()
	return nil
}

// seek makes pos, the OccurrenceID of a line's start (a committed low watermark),
// the next line to read: every line before it was acked by an earlier incarnation.
// OccurrenceID(len(files), 0) is the end of the input.
func (s *lineSpout) seek(pos uint64) error {
	fi, off := int(pos>>40), int64(pos&(1<<40-1))
	if fi == len(s.files) && off == 0 {
		s.cur, s.off, s.eof = fi, 0, true
		return nil
	}
	if fi >= len(s.files) {
		return fmt.Errorf("beyond the %d input files", len(s.files))
	}
	st, err := s.files[fi].Stat()
	if err != nil {
		return err
	}
	if off > st.Size() {
		return fmt.Errorf("%s has %d bytes: it changed since the offset was committed", s.files[fi].Name(), st.Size())
	}
	if _, err := s.files[fi].Seek(off, io.SeekStart); err != nil {
		return err
	}
	s.cur, s.off = fi, off
	s.rd.Reset(s.files[fi])
	return nil
}

// noteLow calls lowMoved if the low watermark advanced since it was last told.
func (s *lineSpout) noteLow() {
	if s.lowMoved == nil {
		return
	}
	if l := s.low(); l > s.lowSeen {
		s.lowSeen = l
		s.lowMoved(l)
	}
}

// low is the smallest id of a line emitted and not acked, or the next id to read.
func (s *lineSpout) low() uint64 {
	if s.head < len(s.order) {
		return s.order[s.head]
	}
	if s.eof {
		return OccurrenceID(len(s.files), 0)
	}
	return OccurrenceID(s.cur, s.off)
}

func (s *lineSpout) NextTuple() {
	if n := len(s.replays); n > 0 {
		pos := s.replays[n-1]
		s.replays = s.replays[:n-1]
		text, err := s.readAt(pos)
		if err != nil {
			// The file changed under us: report, and count the line as lost rather than
			// loop on it or count other text; the job then exits non-zero.
			s.out.ReportError(fmt.Errorf("replay: %w", err))
			s.p.lost.Add(1)
			s.ack(pos.ID)
			return
		}
		s.p.replays.Add(1)
		s.emit(pos.ID, text)
		return
	}
	for !s.eof {
		raw, err := s.readLine()
		if len(raw) > 0 || err == nil {
			start := s.off
			s.off += int64(len(raw))
			text, skip := trimLine(raw, start)
			id := OccurrenceID(s.cur, start+int64(skip))
			s.order = append(s.order, id)
			s.p.lines.Add(1)
			s.emit(id, text)
			return
		}
		if err != io.EOF {
			s.out.ReportError(fmt.Errorf("read %s: %w", s.files[s.cur].Name(), err))
			s.p.lost.Add(1)
		}
		s.cur++
		s.off = 0
		if s.cur < len(s.files) {
			s.rd.Reset(s.files[s.cur])
		} else {
			s.eof = true
		}
	}
	s.noteLow()
	if s.head == len(s.order) && len(s.replays) == 0 {
		s.p.finish()
	}
}

// readLine returns the next line including its '\n' (without one at the end of file).
func (s *lineSpout) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.rd.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if err != bufio.ErrBufferFull {
			return s.line, err
		}
	}
}

// trimLine drops the line end ("\n", "\r\n") and, at the start of a file, a UTF-8
// byte-order mark; skip is the number of bytes dropped at the front.
func trimLine(raw []byte, off int64) (text string, skip int) {
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	if off == 0 && bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) {
		raw, skip = raw[3:], 3
	}
	return string(raw), skip
}

// readAt reads a line again for a replay, from its file offset, and checks that it is
// the text first read.
func (s *lineSpout) readAt(pos LinePos) (string, error) {
	fi, off := int(pos.ID>>40), int64(pos.ID&(1<<40-1))
	if fi >= len(s.files) {
		return "", fmt.Errorf("no file %d", fi)
	}
	buf := make([]byte, pos.Len)
	n, err := s.files[fi].ReadAt(buf, off)
	text := string(buf[:n])
	if n < len(buf) || checksum(text) != pos.Sum {
		if err == nil || err == io.EOF {
			err = errors.New("the file changed since it was first read")
		}
		return "", fmt.Errorf("line at %s offset %d (%d bytes, checksum %08x): read %d bytes, checksum %08x: %w",
			s.files[fi].Name(), off, pos.Len, pos.Sum, n, checksum(text), err)
	}
	return text, nil
}

// lineOut is one emit of a line in one allocation: the message id (kept by the spout
// until the line's tree ends), the numbers of its pos field and the tuple's values
// (read by the bolts, never written).
type lineOut struct {
	id   LinePos
	pos  [2]uint64
	vals [2]any
}

func (s *lineSpout) emit(id uint64, text string) {
	o := &lineOut{id: LinePos{ID: id, Low: s.low(), Len: uint32(len(text)), Sum: checksum(text)}}
	o.pos = [2]uint64{o.id.ID, o.id.Low}
	o.vals = [2]any{text, o.pos[:]}
	if err := s.out.Emit(o.vals[:], &o.id); err != nil {
		s.out.ReportError(err)
	}
}

func (s *lineSpout) ack(id uint64) {
	s.acked[id] = true
	for s.head < len(s.order) && s.acked[s.order[s.head]] {
		delete(s.acked, s.order[s.head])
		s.head++
	}
	if s.head > 4096 && s.head*2 > len(s.order) {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
	s.noteLow()
}

func (s *lineSpout) Ack(msgID any) {
	s.p.acked.Add(1)
	s.ack(msgID.(*LinePos).ID)
}

func (s *lineSpout) Fail(msgID any) {
	s.replays = append(s.replays, *msgID.(*LinePos))
}

func (s *lineSpout) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// splitFields are the fields of split's stream (see the package doc).
var splitFields = []string{"word", "pos", "off"}

// failures injects --fail-rate: copied into each task, with its own generator.
type failures struct {
	rate float64
	seed uint64
	rng  *rand.Rand
}

func (f *failures) prepare(tc topology.TaskContext) {
	f.rng = rand.New(rand.NewPCG(f.seed, uint64(tc.TaskID)))
}

func (f *failures) fail() bool { return f.rate > 0 && f.rng.Float64() < f.rate }

// fieldIndex finds a bolt's input fields by name, once per input stream: per tuple it
// only compares the stream's *tuple.Fields with the one it resolved last.
type fieldIndex struct {
	names  []string
	fields *tuple.Fields
	at     []int
	// optional, if set, is a field a stream may lack: optAt is its position in the
	// stream last resolved, or -1 (count's off, absent when it counts lines).
	optional string
	optAt    int
}

// check refuses, when the task starts, an input stream of its component that
// lacks one of the names: each of its tuples would fail, and its spout replay it
// for ever (a files spout never ends), which a key or field misnamed in a Flux
// file otherwise caused. tc.Topology nil (outside the engine): nothing to check.
func (x *fieldIndex) check(tc topology.TaskContext) error {
	if tc.Topology == nil {
		return nil
	}
	c := tc.Topology.Component(tc.Component)
	if c == nil {
		return nil
	}
	for _, in := range c.Inputs {
		src := tc.Topology.Component(in.Component)
		if src == nil || src.Streams[in.Stream] == nil {
			continue
		}
		f := src.Streams[in.Stream].Source.Fields
		for _, n := range x.names {
			if !f.Contains(n) {
				return fmt.Errorf("%s reads field %q, which stream %q of %s does not have (its fields %v): each of its tuples would fail and be replayed for ever",
					tc.Component, n, in.Stream, in.Component, f)
			}
		}
	}
	return nil
}

// checkGrouping refuses, when a count task starts, an input grouping that sends
// one occurrence to several of its tasks: ALL (each task counts it), or, when
// lines are replayed (tracked), a random one (SHUFFLE, LOCAL_OR_SHUFFLE, NONE),
// which sends a replay where its first attempt did not go, to a task that has
// not seen it. FIELDS on any fields (a replay carries the same values), GLOBAL,
// DIRECT and custom groupings, or a single task, are the wiring's to get right.
func checkGrouping(tc topology.TaskContext, tracked bool) error {
	if tc.Topology == nil || tc.Parallelism <= 1 {
		return nil
	}
	c := tc.Topology.Component(tc.Component)
	if c == nil {
		return nil
	}
	for _, in := range c.Inputs {
		switch k := in.Grouping.Kind; {
		case k == topology.AllKind,
			tracked && (k == topology.ShuffleKind || k == topology.LocalOrShuffleKind || k == topology.NoneKind):
			return fmt.Errorf("%s takes stream %q of %s by %v grouping over %d tasks: an occurrence would be counted by several of them (every task, or a replay by another than its first); group it by FIELDS on the key",
				tc.Component, in.Stream, in.Component, k, tc.Parallelism)
		}
	}
	return nil
}

// of returns the positions of the names in t's stream, in the order of names; a
// missing field panics as ValueByField does (failing the input).
func (x *fieldIndex) of(t *tuple.Tuple) []int {
	if f := t.Fields(); f != x.fields || x.at == nil {
		at := make([]int, len(x.names))
		for i, n := range x.names {
			if at[i] = f.Index(n); at[i] < 0 || at[i] >= t.Len() {
				t.ValueByField(n) // panics, naming the field and the stream
			}
		}
		x.optAt = -1
		if x.optional != "" {
			if i := f.Index(x.optional); i >= 0 && i < t.Len() {
				x.optAt = i
			}
		}
		x.fields, x.at = f, at
	}
	return x.at
}

// splitBolt emits one anchored tuple per word: (word, pos, off). pos is made once
// per line and shared by its words; the words' values, their string headers and
// their offsets are carved out of chunks of the task's (wordValues), so that a word
// costs no allocation of its own: boxing the word and making its values were two
// allocations per word, about 6% of a worker's CPU on the 2-worker row.
//
// field and json generalise it for package builtin's gale.bolt.Split: the field
// read ("" is "line"), and whether it holds a JSON array whose elements are the
// pieces (each at the byte offset where it starts) rather than words.
type splitBolt struct {
	failures
	field string
	json  bool
	in    fieldIndex // line (or field), pos
	box   wordValues
}

func (b *splitBolt) Prepare(ctx context.Context, tc topology.TaskContext) error {
	b.prepare(tc)
	b.in.names = []string{cmp.Or(b.field, "line"), "pos"}
	return b.in.check(tc)
}

func (b *splitBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	if b.fail() {
		return errInjected
	}
	at := b.in.of(t)
	pos := t.Value(at[1]) // passed on as it came: one slice for the line's words
	if b.json {
		return b.elements(t, at[0], pos, out)
	}
	line, ok := t.Value(at[0]).(string)
	if !ok {
		// Replaying it would bring the same value: report it, and ack the line.
		out.ReportError(fmt.Errorf("split: field %s of %s is %T, not a string", b.in.names[0], t.SourceComponent(), t.Value(at[0])))
		return nil
	}
	var err error
	Words(line, func(w string, off int) {
		if e := out.Emit(b.box.values(w, pos, off)); e != nil && err == nil {
			err = e
		}
	})
	return err
}

// wordValues makes split's emitted values from chunks: the values of 128 words in
// one []any, their words' string headers in one []string and their offsets in one
// []int, each boxed in place (the interface points into the chunk, as the codec's
// decoder boxes; an offset below 256 needs no box: Go's own conversion points it at
// a static table). A chunk lives until the last tuple holding one of its values is
// gone: tuples are short-lived (acked within the message timeout), so a task holds
// a few chunks at most. The values are never written after the emit (a tuple's
// values are read-only), and each tuple's slice is capped, so an append by a
// reader would copy.
type wordValues struct {
	vals []any
	strs []string
	offs []int
}

const wordChunk = 128

func (c *wordValues) values(w string, pos any, off int) tuple.Values {
	if cap(c.vals)-len(c.vals) < 3 {
		c.vals = make([]any, 0, 3*wordChunk)
	}
	if len(c.strs) == cap(c.strs) {
		c.strs = make([]string, 0, wordChunk)
	}
	c.strs = append(c.strs, w)
	word := boxString(&c.strs[len(c.strs)-1])
	var offv any
	if off < 256 {
		offv = off // no allocation: Go boxes small integers from a static table
	} else {
		if len(c.offs) == cap(c.offs) {
			c.offs = make([]int, 0, wordChunk)
		}
		c.offs = append(c.offs, off)
		offv = boxInt(&c.offs[len(c.offs)-1])
	}
	n := len(c.vals)
	c.vals = append(c.vals, word, pos, offv)
	return c.vals[n : n+3 : n+3]
}

// eface is the layout of an interface value (any).
type eface struct{ typ, data unsafe.Pointer }

var (
	typeWordString = typeWord("")
	typeWordInt    = typeWord(0)
)

func typeWord(x any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&x)).typ }

// boxString returns *p as an interface whose data is p itself (no copy, no
// allocation); *p must not change afterwards.
func boxString(p *string) (x any) {
	e := (*eface)(unsafe.Pointer(&x))
	e.typ, e.data = typeWordString, unsafe.Pointer(p)
	return x
}

// boxInt is boxString's for an int.
func boxInt(p *int) (x any) {
	e := (*eface)(unsafe.Pointer(&x))
	e.typ, e.data = typeWordInt, unsafe.Pointer(p)
	return x
}

func (b *splitBolt) Cleanup() error { return nil }

// countBolt counts each word occurrence once. Its counts are its own until Cleanup
// hands them to the run's results.
//
// It is a plain Bolt that acks each input at the end of its Execute, as a BasicBolt
// would: cluster mode's count (changelogCount, which acks only once an occurrence's
// changelog batch is stored) must be a plain Bolt, and the two modes' topologies have
// the same shape, component kinds included, so that their fingerprints are equal.
//
// key and value generalise it for package builtin's gale.bolt.Count and Sum: the
// field counted by ("" is "word"; a value that is not a string is counted by its
// fmt.Sprint), and, if set, the field whose numbers are summed per key instead of
// counted. A stream without an off field counts one occurrence per line (at its
// line_id): a count of lines, or a sum over them.
type countBolt struct {
	failures
	key, value string
	tracked    bool       // acker tasks run: lines may be replayed
	results    *results   // the end-of-run hand-off, written once, in Cleanup
	in         fieldIndex // word (or key), pos [, value]; off optional
	out        topology.OutputCollector
	counts     map[string]uint64
	sums       map[string]float64 // value set: the sums, and counts unused
	seen       *Occurrences
	dups       uint64
}

func (b *countBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.prepare(tc)
	b.out = out
	b.in.names = []string{cmp.Or(b.key, "word"), "pos"}
	b.in.optional = "off"
	b.counts = map[string]uint64{}
	if b.value != "" {
		b.in.names = append(b.in.names, b.value)
		b.sums = map[string]float64{}
	}
	if b.tracked {
		b.seen = NewOccurrences()
	}
	if err := b.in.check(tc); err != nil {
		return err
	}
	return checkGrouping(tc, b.tracked)
}

func (b *countBolt) Execute(t *tuple.Tuple) {
	if err := b.execute(t); err != nil {
		_ = b.out.FailWith(t, err)
		return
	}
	_ = b.out.Ack(t)
}

func (b *countBolt) execute(t *tuple.Tuple) error {
	at := b.in.of(t)
	word := keyString(t.Value(at[0]))
	pos, ok := t.Value(at[1]).([]uint64) // line_id, low
	if !ok || len(pos) != 2 {
		return fmt.Errorf("wordcount: field pos of %s holds %T %v, want 2 numbers (line_id, low)", t.SourceComponent(), t.Value(at[1]), t.Value(at[1]))
	}
	occ := pos[0]
	if b.in.optAt >= 0 {
		occ += uint64(t.Value(b.in.optAt).(int))
	}
	// Without acker tasks nothing is tracked or replayed, and a line counts as acked as
	// soon as it is emitted, so the watermark says nothing: every occurrence is new.
	if b.seen != nil && b.seen.Seen(occ, pos[1]) {
		// Applied by an earlier attempt of this line: the effect is already there, so
		// ack it (an idempotent sink acks duplicates; failing them again would only
		// make long lines replay forever under --fail-rate).
		b.dups++
		return nil
	}
	if b.fail() {
		return errInjected
	}
	if b.sums != nil {
		v, err := Number(t.Value(at[2]))
		if err != nil {
			// Replaying the line would only bring the same value: report it, and
			// ack it (the job's errors say what was left out).
			b.out.ReportError(fmt.Errorf("sum: field %s of %s at %d:%d: %w", b.value, t.SourceComponent(), occ>>40, occ&(1<<40-1), err))
			return nil
		}
		if b.seen != nil {
			b.seen.Add(occ)
		}
		b.sums[word] += v
		return nil
	}
	if b.seen != nil {
		b.seen.Add(occ)
	}
	b.counts[word]++
	return nil
}

// keyString is the key a count or sum keeps for a field's value: a string as it
// is, anything else as fmt.Sprint prints it (a JSON number 3 as "3").
func keyString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// Number is a summed field's value as a float64: an integer or float of any Go
// kind, or a string holding a decimal number (a CSV field, say). Anything else is
// an error naming what it got, NaN and the infinities too (strconv reads "NaN"
// and "Inf"): one of them would make its key's sum NaN or Inf for good.
func Number(v any) (float64, error) {
	f, err := number(v)
	if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, fmt.Errorf("%T %v is not a finite number", v, v)
	}
	return f, err
}

func number(v any) (float64, error) {
	switch n := v.(type) {
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case int32:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	case uint32:
		return float64(n), nil
	case float64:
		return n, nil
	case float32:
		return float64(n), nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
			return f, nil
		}
		return 0, fmt.Errorf("%q is not a number", n)
	}
	return 0, fmt.Errorf("%T %v is not a number", v, v)
}

// Cleanup hands the task's counts to the run's results: the task has stopped, and
// its counts are final.
func (b *countBolt) Cleanup() error {
	b.results.add(b.counts, b.sums, b.dups)
	b.counts, b.sums = nil, nil
	return nil
}

// results is the one hand-off of a word-count run's outcome out of the topology: each
// count task hands it its own counts once, in Cleanup, and Run reads it after every
// task has stopped. In a multi-process run this hand-off is the topology's sink. Safe
// for concurrent use.
type results struct {
	mu     sync.Mutex
	counts map[string]uint64  // word → occurrences, summed over the count tasks
	sums   map[string]float64 // a sum's: key → sum, over the tasks
	dups   uint64             // replayed occurrences the count tasks absorbed
}

// reset empties r for a new run.
func (r *results) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts, r.sums, r.dups = nil, nil, 0
}

func (r *results) add(counts map[string]uint64, sums map[string]float64, dups uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = counts // the first task's map, which it gave up
	} else {
		for w, n := range counts {
			r.counts[w] += n
		}
	}
	if r.sums == nil {
		r.sums = sums
	} else {
		for k, v := range sums {
			r.sums[k] += v
		}
	}
	r.dups += dups
}

// build returns the word-count topology for j. Every task gets its own bolt or spout
// value from its factory, holding copies of the options it needs; the count tasks
// share only j.results, their end-of-run hand-off, and the spout only j.progress.
func (j *job) build() (*topology.Topology, error) {
	o := j.opts
	fail := failures{rate: o.FailRate, seed: o.Seed}
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout {
		return &lineSpout{names: append([]string(nil), o.Files...), p: &j.progress}
	}, 1).Output(lineFields...)
	from := "lines"
	if o.interpose != nil { // tests only: a bolt between lines and split
		b.SetBolt("interpose", o.interpose, 1).ShuffleGrouping("lines").Output(lineFields...)
		from = "interpose"
	}
	par := o.Parallelism
	if par <= 0 {
		par = 2
	}
	b.SetBasicBolt("split", func() topology.BasicBolt { return &splitBolt{failures: fail} }, par).
		ShuffleGrouping(from).Output(splitFields...)
	b.SetBolt("count", func() topology.Bolt {
		return &countBolt{failures: fail, tracked: o.Config.Ackers > 0, results: &j.results}
	}, par).FieldsGrouping("split", "word")
	return b.Build()
}
