package natstransport

import (
	"encoding/binary"
	"fmt"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
)

// fragMarker begins a frame that holds one part of a split message (a whole message
// begins with codec.Magic): then uvarint part (from 0), uvarint parts, and the
// codec's encoding of a KindTuples message with that part's tuples and the whole
// message's From, To, Epoch, Seq and Pos.
const fragMarker = 0xF7

// maxEnvelope bounds the bytes a split frame adds before the codec's encoding.
const maxEnvelope = 1 + 2*binary.MaxVarintLen64

func init() {
	if fragMarker == codec.Magic {
		panic("natstransport: the split marker is the codec's magic byte")
	}
}

// sendSplit sends a KindTuples message too big for one frame as consecutive frames of
// whole tuples, each under limit bytes. Every tuple is checked first: one that cannot
// fit in a frame by itself fails the send, and nothing is published.
func (t *Transport) sendSplit(subj string, m *transport.Message, limit int) error {
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0] }()

	part := *m
	part.Tuples = m.Tuples[:0:0] // non-nil: encoded with a tuple count of 0
	var err error
	if buf, err = codec.AppendMessage(buf[:0], &part, t.streams); err != nil {
		return t.fail(fmt.Errorf("natstransport: encode tuples from %d to %d: %w", m.From, m.To, err))
	}
	head := len(buf) // every frame's header, a one-byte count included
	// The count of a part takes at most MaxVarintLen64 bytes instead of one.
	budget := limit - maxEnvelope - head - (binary.MaxVarintLen64 - 1)
	sizes := make([]int, len(m.Tuples))
	for i := range m.Tuples {
		part.Tuples = m.Tuples[i : i+1]
		if buf, err = codec.AppendMessage(buf[:0], &part, t.streams); err != nil {
			return t.fail(fmt.Errorf("natstransport: encode tuples from %d to %d: %w", m.From, m.To, err))
		}
		sizes[i] = len(buf) - head
		if sizes[i] > budget {
			src := m.Tuples[i].Source()
			return t.fail(fmt.Errorf("natstransport: tuple %d of %d from %d to %d (stream %q of %q) encodes to %d bytes; "+
				"with a frame's header it needs %d, over the server's max_payload of %d bytes",
				i, len(m.Tuples), m.From, m.To, src.Stream, src.Component, sizes[i], sizes[i]+head+maxEnvelope, limit))
		}
	}
	// Greedy parts: as many tuples as fit the budget.
	var bounds []int // end of each part
	used := 0
	for i, n := range sizes {
		if used+n > budget {
			bounds = append(bounds, i)
			used = 0
		}
		used += n
	}
	bounds = append(bounds, len(sizes))

	t.splitMu.Lock() // the frames of two split messages on one link must not interleave
	defer t.splitMu.Unlock()
	start := 0
	for p, end := range bounds {
		part.Tuples = m.Tuples[start:end]
		start = end
		buf = append(buf[:0], fragMarker)
		buf = binary.AppendUvarint(buf, uint64(p))
		buf = binary.AppendUvarint(buf, uint64(len(bounds)))
		if buf, err = codec.AppendMessage(buf, &part, t.streams); err != nil {
			return t.fail(fmt.Errorf("natstransport: encode tuples from %d to %d: %w", m.From, m.To, err))
		}
		if len(buf) > limit { // the budget above makes this impossible
			return t.fail(fmt.Errorf("natstransport: part %d of %d from %d to %d is %d bytes, over max_payload %d", p, len(bounds), m.From, m.To, len(buf), limit))
		}
		if t.dropFrame != nil && t.dropFrame(m, p, len(bounds)) {
			continue
		}
		if err := t.pub(subj, buf); err != nil {
			return t.publishFailed(fmt.Sprintf("publish part %d of %d of tuples from %d to %d on %s", p, len(bounds), m.From, m.To, subj), err)
		}
	}
	return nil
}
