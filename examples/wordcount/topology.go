// Package wordcount is gale's main example job: count the words of text files with
// Storm's reliable processing, exactly, even when bolts fail and lines are replayed.
//
//	lines (spout, 1 task) --shuffle--> split (2 tasks) --fields(word)--> count (2 tasks)
//
// The spout reads files lazily (one buffered line at a time) and emits each line as a
// tracked tuple whose message id names the file and byte offset. split emits one tuple
// per word anchored to the line; count adds it to its counts. A failed or timed-out
// line is read again from its offset and re-emitted. Count tasks apply each word
// occurrence at most once (see Occurrences), so the final counts are exact.
package wordcount

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// LinePos is the message id of a line and travels with its tuples: ID is
// OccurrenceID(file, offset of the line's text), Low the spout's low watermark when
// this attempt was emitted.
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

// lineSpout reads the files in order and replays failed lines from their offsets.
type lineSpout struct {
	job   *job
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
}

func (s *lineSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	s.acked = map[uint64]bool{}
	for _, name := range s.job.opts.Files {
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
	return nil
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
			s.job.lost.Add(1)
			s.ack(pos.ID)
			return
		}
		s.job.replays.Add(1)
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
			s.job.lines.Add(1)
			s.emit(id, text)
			return
		}
		if err != io.EOF {
			s.out.ReportError(fmt.Errorf("read %s: %w", s.files[s.cur].Name(), err))
			s.job.lost.Add(1)
		}
		s.cur++
		s.off = 0
		if s.cur < len(s.files) {
			s.rd.Reset(s.files[s.cur])
		} else {
			s.eof = true
		}
	}
	if s.head == len(s.order) && len(s.replays) == 0 {
		s.job.finish()
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

func (s *lineSpout) emit(id uint64, text string) {
	pos := &LinePos{ID: id, Low: s.low(), Len: uint32(len(text)), Sum: checksum(text)}
	if err := s.out.Emit(tuple.Values{text, pos}, pos); err != nil {
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
}

func (s *lineSpout) Ack(msgID any) {
	s.job.acked.Add(1)
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

// splitBolt emits one anchored tuple per word: (word, line position, offset in line).
type splitBolt struct {
	job *job
	rng *rand.Rand
}

func (b *splitBolt) Prepare(ctx context.Context, tc topology.TaskContext) error {
	b.rng = rand.New(rand.NewPCG(b.job.opts.Seed, uint64(tc.TaskID)))
	return nil
}

func (b *splitBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	if b.job.opts.FailRate > 0 && b.rng.Float64() < b.job.opts.FailRate {
		return errInjected
	}
	line := t.Value(0).(string)
	pos := t.Value(1).(*LinePos)
	var err error
	Words(line, func(w string, off int) {
		if e := out.Emit(tuple.Values{w, pos, off}); e != nil && err == nil {
			err = e
		}
	})
	return err
}

func (b *splitBolt) Cleanup() error { return nil }

// countBolt counts each word occurrence once.
type countBolt struct {
	job    *job
	rng    *rand.Rand
	counts map[string]uint64
	seen   *Occurrences
	dups   uint64
}

func (b *countBolt) Prepare(ctx context.Context, tc topology.TaskContext) error {
	b.rng = rand.New(rand.NewPCG(b.job.opts.Seed, uint64(tc.TaskID)))
	b.counts = map[string]uint64{}
	if b.job.opts.Config.Ackers > 0 {
		b.seen = NewOccurrences()
	}
	return nil
}

func (b *countBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	word := t.Value(0).(string)
	pos := t.Value(1).(*LinePos)
	occ := pos.ID + uint64(t.Value(2).(int))
	// Without acker tasks nothing is tracked or replayed, and a line counts as acked as
	// soon as it is emitted, so the watermark says nothing: every occurrence is new.
	if b.seen != nil && b.seen.Seen(occ, pos.Low) {
		// Applied by an earlier attempt of this line: the effect is already there, so
		// ack it (an idempotent sink acks duplicates; failing them again would only
		// make long lines replay forever under --fail-rate).
		b.dups++
		return nil
	}
	if b.job.opts.FailRate > 0 && b.rng.Float64() < b.job.opts.FailRate {
		return errInjected
	}
	if b.seen != nil {
		b.seen.Add(occ)
	}
	b.counts[word]++
	return nil
}

func (b *countBolt) Cleanup() error {
	b.job.mergeCounts(b.counts, b.dups)
	return nil
}

// Build returns the word-count topology for j.
func (j *job) build() (*topology.Topology, error) {
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &lineSpout{job: j} }, 1).Output("line", "pos")
	from := "lines"
	if j.opts.interpose != nil { // tests only: a bolt between lines and split
		b.SetBolt("interpose", j.opts.interpose, 1).ShuffleGrouping("lines").Output("line", "pos")
		from = "interpose"
	}
	b.SetBasicBolt("split", func() topology.BasicBolt { return &splitBolt{job: j} }, 2).
		ShuffleGrouping(from).Output("word", "pos", "off")
	b.SetBasicBolt("count", func() topology.BasicBolt { return &countBolt{job: j} }, 2).
		FieldsGrouping("split", "word")
	return b.Build()
}

func (j *job) mergeCounts(counts map[string]uint64, dups uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for w, n := range counts {
		j.counts[w] += n
	}
	j.dups += dups
}
