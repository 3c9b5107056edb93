package natstransport_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/tuple"
)

// The split tests run on a server whose max_payload is 4 KiB.
const smallPayload = 4096

// batchTopology has one spout, "words", whose stream carries (word, n).
var batchTopology = sync.OnceValue(func() *topology.Topology {
	b := topology.NewBuilder()
	b.SetSpout("words", func() topology.Spout { return &idleSpout{} }, 1).Output("word", "n")
	b.SetBolt("sink", func() topology.Bolt { return &idleBolt{} }, 1).ShuffleGrouping("words")
	topo, err := b.Build()
	if err != nil {
		panic(err)
	}
	return topo
})

type idleSpout struct{ topology.BaseSpout }

func (*idleSpout) NextTuple() {}

type idleBolt struct{ topology.BaseBolt }

func (*idleBolt) Execute(*tuple.Tuple) {}

// batch returns a KindTuples message of n tuples (word, i) from task 1 to task 2;
// each word is wordLen bytes.
func batch(seq uint64, n, wordLen int) *transport.Message {
	src := batchTopology().Component("words").Streams[tuple.DefaultStream].Source
	ts := make([]*tuple.Tuple, n)
	for i := range ts {
		w := fmt.Sprintf("%d-%d-", seq, i)
		w += strings.Repeat("x", max(wordLen-len(w), 0))
		ts[i] = tuple.New(src, 1, tuple.Values{w, int64(i)})
	}
	return &transport.Message{Kind: transport.KindTuples, From: 1, To: 2, Epoch: 42, Seq: seq, Pos: seq * 1000, Tuples: ts}
}

// pair is a sender and a receiver on their own connections to one server, and a raw
// connection that counts the frames published to endpoint 2's data subject.
type pair struct {
	snd, rcv *natstransport.Transport
	in       transport.Inbox
	frames   chan *nats.Msg
	url      string
}

func newPair(t *testing.T, opts ...natstransport.Option) *pair {
	t.Helper()
	srv := runServer(t, maxPayload(smallPayload))
	prefix := newPrefix()
	streams := codec.NewStreams(batchTopology())
	mk := func(extra ...natstransport.Option) *natstransport.Transport {
		nc := connect(t, srv.ClientURL())
		tr, err := natstransport.New(nc, streams, append([]natstransport.Option{natstransport.WithPrefix(prefix),
			// Tasks 1 to 3 (senders 1 and 3, receiver 2) and host 1.
			natstransport.WithEndpoints(natstransport.Endpoints(3, 1))}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	p := &pair{snd: mk(opts...), rcv: mk(), frames: make(chan *nats.Msg, 1024), url: srv.ClientURL()}
	var err error
	if p.in, err = p.rcv.Register(2); err != nil {
		t.Fatal(err)
	}
	data, _ := p.rcv.Subjects(2)
	spy := connect(t, srv.ClientURL())
	if _, err := spy.ChanSubscribe(data, p.frames); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// take waits for n data messages at the receiver.
func (p *pair) take(t *testing.T, n int) []*transport.Message {
	t.Helper()
	var got []*transport.Message
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		got = p.in.TakeTuples(got)
		if len(got) >= n {
			return got
		}
		select {
		case <-p.in.Signal():
		case <-deadline.C:
			t.Fatalf("%d of %d messages arrived; receiver stats %+v", len(got), n, p.rcv.Stats())
		}
	}
}

// A batch several times max_payload travels as frames under it and arrives whole:
// every tuple, in order, with the message's own Seq and Pos.
func TestSplitBatchArrivesWhole(t *testing.T) {
	p := newPair(t)
	m := batch(1, 600, 40) // about 30 KB
	whole, err := codec.AppendMessage(nil, m, codec.NewStreams(batchTopology()))
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) < 6*smallPayload {
		t.Fatalf("the batch encodes to %d bytes, want several times %d", len(whole), smallPayload)
	}
	if err := p.snd.Send(m); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 {
		t.Fatalf("%d messages arrived, want 1", len(got))
	}
	g := got[0]
	if g.From != 1 || g.To != 2 || g.Epoch != 42 || g.Seq != 1 || g.Pos != 1000 || len(g.Tuples) != 600 {
		t.Fatalf("arrived %d -> %d epoch %d seq %d pos %d with %d tuples", g.From, g.To, g.Epoch, g.Seq, g.Pos, len(g.Tuples))
	}
	for i, tu := range g.Tuples {
		if w, n := tu.StringByField("word"), tu.Values()[1]; w != m.Tuples[i].StringByField("word") || n != int64(i) || tu.SourceComponent() != "words" {
			t.Fatalf("tuple %d arrived as (%q, %v) from %q", i, w, n, tu.SourceComponent())
		}
	}
	// A small batch after it travels whole: the frames before it on the spy's
	// subscription are the big batch's.
	if err := p.snd.Send(batch(2, 1, 8)); err != nil {
		t.Fatal(err)
	}
	frames := 0
	for f := range p.frames {
		if f.Data[0] == codec.Magic {
			break
		}
		frames++
		if len(f.Data) > smallPayload {
			t.Fatalf("a frame of %d bytes, over max_payload %d", len(f.Data), smallPayload)
		}
	}
	if frames < 7 {
		t.Fatalf("%d frames on the wire for %d bytes, want at least 7", frames, len(whole))
	}
	p.take(t, 1)
	if n := p.in.Tuples(); n != 0 {
		t.Fatalf("Tuples() = %d after taking the batch", n)
	}
	if s := p.rcv.Stats(); s.Delivered != 2 || s.Dropped != 0 || s.Errors != 0 {
		t.Fatalf("receiver stats %+v, want 2 delivered", s)
	}
	t.Logf("%d bytes in %d frames", len(whole), frames)
}

// A lost frame loses its message, whichever frame it is: the receiver delivers the
// next message and never a part of the broken one, and counts one drop.
func TestSplitLostFrameDropsTheMessage(t *testing.T) {
	for _, which := range []string{"first", "middle", "last"} {
		t.Run(which, func(t *testing.T) {
			var parts int
			drop := natstransport.WithFrameDrop(func(m *transport.Message, part, n int) bool {
				parts = n
				switch which {
				case "first":
					return m.Seq == 1 && part == 0
				case "middle":
					return m.Seq == 1 && part == n/2
				}
				return m.Seq == 1 && part == n-1
			})
			p := newPair(t, drop)
			for seq := uint64(1); seq <= 3; seq++ {
				n := 300
				if seq == 3 {
					n = 5 // a whole message after the split ones
				}
				if err := p.snd.Send(batch(seq, n, 40)); err != nil {
					t.Fatal(err)
				}
			}
			got := p.take(t, 2)
			if len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 || len(got[0].Tuples) != 300 || len(got[1].Tuples) != 5 {
				for _, g := range got {
					t.Logf("arrived seq %d with %d tuples", g.Seq, len(g.Tuples))
				}
				t.Fatalf("%d messages arrived, want seq 2 (300 tuples) and 3 (5 tuples)", len(got))
			}
			if s := p.rcv.Stats(); s.Dropped != 1 || s.Delivered != 2 || s.Errors != 0 {
				t.Fatalf("receiver stats %+v, want 1 dropped and 2 delivered", s)
			}
			if parts < 3 {
				t.Fatalf("the batch went in %d frames, want at least 3", parts)
			}
		})
	}
}

// A tuple that cannot fit in a frame by itself fails the send with its size and the
// limit, and nothing of its batch is published.
func TestSplitOversizedTuple(t *testing.T) {
	p := newPair(t)
	m := batch(1, 10, 40)
	m.Tuples[7] = batch(1, 1, 5000).Tuples[0]
	err := p.snd.Send(m)
	if err == nil {
		t.Fatal("a 5000-byte tuple was sent through a 4096-byte max_payload")
	}
	for _, want := range []string{"tuple 7 of 10", "encodes to 50", "max_payload of 4096 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := p.snd.Send(batch(2, 3, 10)); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("got %d messages, first seq %d; want only seq 2", len(got), got[0].Seq)
	}
	if f := <-p.frames; len(p.frames) != 0 || len(f.Data) > 200 {
		t.Fatalf("frames published: %d more after one of %d bytes, want only the small batch's", len(p.frames), len(f.Data))
	}
	if s := p.snd.Stats(); s.Errors != 1 || !strings.Contains(s.LastError, "max_payload") {
		t.Fatalf("sender stats %+v, want the error counted", s)
	}
}

// A control message over max_payload is an error; control is never split.
func TestOversizedControlMessage(t *testing.T) {
	p := newPair(t)
	big := &transport.Message{Kind: transport.KindControl, From: -1, To: 2, Seq: 1, Op: 3, Body: make([]byte, 5000)}
	err := p.snd.Send(big)
	if err == nil || !strings.Contains(err.Error(), "control") || !strings.Contains(err.Error(), "max_payload of 4096 bytes") {
		t.Fatalf("Send of a 5000-byte control message: %v", err)
	}
	acks := make([]acker.Msg, 400) // 400 * 19 bytes or more
	err = p.snd.Send(&transport.Message{Kind: transport.KindAcks, From: 1, To: 2, Seq: 2, Acks: acks})
	if err == nil || !strings.Contains(err.Error(), "acks") {
		t.Fatalf("Send of an oversized acks message: %v", err)
	}
	if s := p.snd.Stats(); s.Errors != 2 {
		t.Fatalf("sender stats %+v, want 2 errors", s)
	}
}

// A frame of another codec version is refused, counted, and named with both versions;
// a frame that is not gale's is refused too; neither stops the next message.
func TestForeignFrames(t *testing.T) {
	p := newPair(t)
	good, err := codec.AppendMessage(nil, batch(1, 2, 8), codec.NewStreams(batchTopology()))
	if err != nil {
		t.Fatal(err)
	}
	newer := append([]byte{}, good...)
	newer[1] = codec.Version + 1
	data, _ := p.rcv.Subjects(2)
	raw := connect(t, p.url)
	for _, f := range [][]byte{newer, []byte("hello"), {0xF7, 9, 2}} {
		if err := raw.Publish(data, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Publish(data, good); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 || got[0].Seq != 1 || len(got[0].Tuples) != 2 {
		t.Fatalf("got %d messages, want the good one", len(got))
	}
	s := p.rcv.Stats()
	if s.Errors != 3 || s.Delivered != 1 {
		t.Fatalf("receiver stats %+v, want 3 errors and 1 delivered", s)
	}
	// The errors are counted in order; the version error was the first. Send it again
	// alone to read its LastError.
	if err := raw.Publish(data, newer); err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish(data, good); err != nil {
		t.Fatal(err)
	}
	p.take(t, 1)
	last := p.rcv.Stats().LastError
	for _, want := range []string{fmt.Sprintf("version %d", codec.Version+1), fmt.Sprintf("version %d", codec.Version), data} {
		if !strings.Contains(last, want) {
			t.Errorf("LastError %q does not say %q", last, want)
		}
	}
	if !errors.Is(codec.CheckVersion(newer), codec.ErrVersion) {
		t.Fatal("the altered frame is not another version")
	}
}
