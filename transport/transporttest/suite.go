package transporttest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// Constructor returns a new transport for one test. It is called once per subtest,
// possibly from parallel subtests; the suite closes what it returns.
type Constructor func(t *testing.T) transport.Transport

// Timeout bounds each wait of the suite: a message to arrive, a flow to end.
var Timeout = 30 * time.Second

// retryEvery is how often the suite re-sends what a transport that is not Lossless
// may have lost, and the tick of the flows (probes, end re-sends).
const retryEvery = 2 * time.Millisecond

// TestTransport runs the conformance suite on the transports newT makes. name names
// the transport in the subtests. Each subtest reads Features and checks every promise
// made, and tolerates what is not promised.
func TestTransport(t *testing.T, name string, newT Constructor) {
	t.Run(name, func(t *testing.T) {
		tests := []struct {
			name string
			fn   func(t *testing.T, newT Constructor)
		}{
			{"EveryKind", testEveryKind},
			{"TuplesCount", testTuplesCount},
			{"UnknownEndpoint", testUnknownEndpoint},
			{"RegisterTwice", testRegisterTwice},
			{"Unregister", testUnregister},
			{"Ordered", testOrdered},
			{"NoDuplicates", testNoDuplicates},
			{"Lossless", testLossless},
			{"ControlNotBehindData", testControlNotBehindData},
			{"FanIn", testFanIn},
			{"FanOut", testFanOut},
			{"LossWhereAllowed", testLossWhereAllowed},
			{"Shutdown", testShutdown},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, newT)
			})
		}
	})
}

// open makes a transport, closed when the test ends, with the endpoints registered.
func open(t *testing.T, newT Constructor, endpoints ...int) (transport.Transport, map[int]transport.Inbox) {
	t.Helper()
	tr := newT(t)
	t.Cleanup(func() { _ = tr.Close() })
	boxes := map[int]transport.Inbox{}
	for _, ep := range endpoints {
		in, err := tr.Register(ep)
		if err != nil {
			t.Fatalf("Register(%d): %v", ep, err)
		}
		if in == nil {
			t.Fatalf("Register(%d) returned a nil Inbox", ep)
		}
		boxes[ep] = in
	}
	return tr, boxes
}

func mustSend(t *testing.T, tr transport.Transport, m *transport.Message) {
	t.Helper()
	if err := tr.Send(m); err != nil {
		t.Fatalf("Send(%s %d -> %d seq %d): %v", m.Kind, m.From, m.To, m.Seq, err)
	}
}

// collect takes every message from in until done returns true, checking that each
// lane hands out only its own kinds. Each retryEvery it calls poke (when not nil), to
// re-send what a lossy transport may have lost. It fails naming what after Timeout.
func collect(t *testing.T, in transport.Inbox, what string, poke func(), done func(ctl, data []*transport.Message) bool) (ctl, data []*transport.Message) {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		n, m := len(ctl), len(data)
		ctl = in.TakeControl(ctl)
		data = in.TakeTuples(data)
		for _, c := range ctl[n:] {
			if !c.Kind.Control() {
				t.Fatalf("%s: TakeControl returned %s from %d", what, c.Kind, c.From)
			}
		}
		for _, d := range data[m:] {
			if d.Kind != transport.KindTuples {
				t.Fatalf("%s: TakeTuples returned %s from %d", what, d.Kind, d.From)
			}
		}
		if done(ctl, data) {
			return ctl, data
		}
		select {
		case <-in.Signal():
		case <-tick.C:
			if poke != nil {
				poke()
			}
		case <-deadline.C:
			t.Fatalf("%s: not done after %v (%d control and %d data messages taken)", what, Timeout, len(ctl), len(data))
		}
	}
}

// testEveryKind sends one message of every kind between tasks and one of every
// control kind between hosts, and checks every field arrives intact (and, when the
// transport is Serializing, that nothing is shared with the sender).
func testEveryKind(t *testing.T, newT Constructor) {
	h1, h2 := transport.Host(1), transport.Host(2)
	tr, boxes := open(t, newT, 1, 2, h1, h2)
	f := tr.Features()
	sent := map[int][]*transport.Message{
		2:  sampleMessages(1, 2, 77, 1),
		h2: slices.DeleteFunc(sampleMessages(h1, h2, 78, 1), func(m *transport.Message) bool { return m.Kind == transport.KindTuples }),
	}
	for to, ms := range sent {
		want := map[uint64]*transport.Message{}
		for _, m := range ms {
			want[m.Seq] = m
			mustSend(t, tr, m)
		}
		got := map[uint64]*transport.Message{}
		count := map[uint64]int{}
		poke := func() {
			if f.Lossless {
				return
			}
			for _, m := range ms {
				if got[m.Seq] == nil {
					mustSend(t, tr, m)
				}
			}
		}
		collect(t, boxes[to], fmt.Sprintf("every kind to %d", to), poke, func(ctl, data []*transport.Message) bool {
			clear(count)
			for _, m := range append(slices.Clip(ctl), data...) {
				count[m.Seq]++
				if got[m.Seq] == nil {
					got[m.Seq] = m
				}
			}
			return len(got) >= len(want)
		})
		for seq, w := range want {
			g := got[seq]
			if g == nil {
				t.Errorf("to %d: %s (seq %d) never arrived", to, w.Kind, seq)
				continue
			}
			if d := diffMessage(w, g); d != "" {
				t.Errorf("to %d: %s arrived with %s", to, w.Kind, d)
			}
			if f.Serializing {
				if s := shared(w, g); s != "" {
					t.Errorf("to %d: %s shares %s with the sender, and the transport is Serializing", to, w.Kind, s)
				}
			}
			if f.Lossless && f.NoDuplicates && count[seq] != 1 {
				t.Errorf("to %d: %s arrived %d times", to, w.Kind, count[seq])
			}
		}
		for seq := range got {
			if want[seq] == nil {
				t.Errorf("to %d: a message with seq %d that was never sent", to, seq)
			}
		}
	}
}

// testTuplesCount: Inbox.Tuples counts the tuples waiting, and TakeControl leaves
// them. Exact counts need a Lossless transport without duplicates.
func testTuplesCount(t *testing.T, newT Constructor) {
	tr, boxes := open(t, newT, 1, 2)
	f := tr.Features()
	if !f.Lossless || !f.NoDuplicates {
		t.Skip("counts are exact only when Lossless and NoDuplicates")
	}
	in := boxes[2]
	seq := uint64(0)
	for _, n := range []int{2, 3, 4} {
		seq++
		ts := make([]*tuple.Tuple, n)
		for i := range ts {
			ts[i] = newTuple(SideStream, 1, 2, tuple.Values{int64(i), uint64(seq)})
		}
		mustSend(t, tr, &transport.Message{Kind: transport.KindTuples, From: 1, To: 2, Epoch: 1, Seq: seq, Pos: seq, Tuples: ts})
	}
	seq++
	mustSend(t, tr, &transport.Message{Kind: transport.KindProbe, From: 1, To: 2, Epoch: 1, Seq: seq, Pos: 9})
	// The data may still be on its way in a transport that is not in-process.
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	var ctl []*transport.Message
	for ctl = in.TakeControl(ctl); len(ctl) == 0; ctl = in.TakeControl(ctl) {
		select {
		case <-in.Signal():
		case <-deadline.C:
			t.Fatalf("the probe did not arrive in %v", Timeout)
		}
	}
	if len(ctl) != 1 || ctl[0].Kind != transport.KindProbe {
		t.Fatalf("took %d control messages, want the probe", len(ctl))
	}
	for in.Tuples() < 9 {
		select {
		case <-in.Signal():
		case <-deadline.C:
			t.Fatalf("Tuples() = %d after %v, want 9", in.Tuples(), Timeout)
		}
	}
	if n := in.Tuples(); n != 9 {
		t.Fatalf("Tuples() = %d, want 9", n)
	}
	if again := in.TakeControl(nil); len(again) != 0 {
		t.Fatalf("TakeControl took %d messages, with only tuples waiting", len(again))
	}
	data := in.TakeTuples(nil)
	total := 0
	for _, m := range data {
		total += len(m.Tuples)
	}
	if len(data) != 3 || total != 9 {
		t.Fatalf("TakeTuples took %d messages of %d tuples, want 3 of 9", len(data), total)
	}
	if n := in.Tuples(); n != 0 {
		t.Fatalf("Tuples() = %d after TakeTuples", n)
	}
}

// testUnknownEndpoint: a message to an endpoint nobody registered fails with
// ErrUnknownEndpoint, counted in Stats with LastError set.
func testUnknownEndpoint(t *testing.T, newT Constructor) {
	tr, _ := open(t, newT, 1)
	for i, to := range []int{999, transport.Host(99)} {
		before := tr.Stats()
		err := tr.Send(&transport.Message{Kind: transport.KindAcks, From: 1, To: to, Epoch: 1, Seq: uint64(i + 1),
			Acks: []acker.Msg{{Kind: acker.Ack, Root: 1, Val: 2}}})
		if !errors.Is(err, transport.ErrUnknownEndpoint) {
			t.Fatalf("Send to unknown endpoint %d: %v, want an error wrapping ErrUnknownEndpoint", to, err)
		}
		after := tr.Stats()
		if after.Errors <= before.Errors {
			t.Errorf("Send to unknown endpoint %d: Stats().Errors stayed %d", to, after.Errors)
		}
		if after.LastError == "" {
			t.Errorf("Send to unknown endpoint %d: Stats().LastError is empty", to)
		}
	}
}

// testRegisterTwice: an endpoint has one Inbox.
func testRegisterTwice(t *testing.T, newT Constructor) {
	tr, _ := open(t, newT, 5, transport.Host(3))
	for _, ep := range []int{5, transport.Host(3)} {
		if in, err := tr.Register(ep); err == nil {
			t.Errorf("Register(%d) a second time succeeded (%v)", ep, in)
		}
	}
}

// testUnregister: an unregistered endpoint is unknown to senders, and can be
// registered again (an engine restarted on the same transport).
func testUnregister(t *testing.T, newT Constructor) {
	tr, _ := open(t, newT, 5, 6)
	tr.Unregister(6)
	err := tr.Send(&transport.Message{Kind: transport.KindAcks, From: 5, To: 6, Seq: 1})
	if !errors.Is(err, transport.ErrUnknownEndpoint) {
		t.Fatalf("Send to an unregistered endpoint: %v, want ErrUnknownEndpoint", err)
	}
	in, err := tr.Register(6)
	if err != nil {
		t.Fatalf("Register after Unregister: %v", err)
	}
	seq := uint64(1)
	send := func() {
		seq++
		if err := tr.Send(&transport.Message{Kind: transport.KindAcks, From: 5, To: 6, Seq: seq}); err != nil {
			t.Errorf("Send to the endpoint registered again: %v", err)
		}
	}
	send()
	ctl, _ := collect(t, in, "a message to the endpoint registered again", send,
		func(ctl, _ []*transport.Message) bool { return len(ctl) > 0 })
	if ctl[0].From != 5 || ctl[0].Seq < 2 {
		t.Fatalf("the endpoint registered again got %s from %d seq %d", ctl[0].Kind, ctl[0].From, ctl[0].Seq)
	}
}

// burst is what one endpoint took from two senders: each sent count messages on
// each lane (Seq 1..2*count, tuples on odd, acks on even seqs), interleaved.
type burst struct {
	count      int
	ctl, data  []*transport.Message
	lossless   bool
	senderList []int
}

// sendBurst runs a burst from endpoints 1 and 2 to 3. On a transport that is not
// Lossless, the senders then send sentinels on both lanes (Seq above the burst) until
// one of each lane from each sender arrives: what was not lost has then had its
// chance.
func sendBurst(t *testing.T, tr transport.Transport, in transport.Inbox, count int) burst {
	f := tr.Features()
	senders := []int{1, 2}
	msg := func(from int, seq uint64) *transport.Message {
		m := &transport.Message{From: from, To: 3, Epoch: uint64(from), Seq: seq, Pos: seq}
		if seq%2 == 1 {
			m.Kind = transport.KindTuples
			m.Tuples = []*tuple.Tuple{newTuple(SideStream, from, 3, tuple.Values{int64(seq), uint64(from)})}
		} else {
			m.Kind = transport.KindAcks
			m.Acks = []acker.Msg{{Kind: acker.Ack, Root: seq, Val: uint64(from)}}
		}
		return m
	}
	for seq := uint64(1); seq <= uint64(2*count); seq++ {
		for _, from := range senders {
			mustSend(t, tr, msg(from, seq))
		}
	}
	next := uint64(2*count + 1)
	poke := func() {
		for _, from := range senders {
			mustSend(t, tr, msg(from, next))
			mustSend(t, tr, msg(from, next+1))
		}
		next += 2
	}
	b := burst{count: count, lossless: f.Lossless, senderList: senders}
	b.ctl, b.data = collect(t, in, "a burst from 1 and 2 to 3", poke, func(ctl, data []*transport.Message) bool {
		if f.Lossless {
			return len(ctl) >= 2*count && len(data) >= 2*count
		}
		sentinels := map[[2]int]bool{}
		for _, m := range append(slices.Clip(ctl), data...) {
			if m.Seq > uint64(2*count) {
				sentinels[[2]int{m.From, int(m.Kind)}] = true
			}
		}
		return len(sentinels) == 4
	})
	return b
}

// from returns the burst's messages from one sender on one lane, in arrival order,
// without the sentinels.
func (b burst) from(sender int, lane []*transport.Message) []uint64 {
	var seqs []uint64
	for _, m := range lane {
		if m.From == sender && m.Seq <= uint64(2*b.count) {
			seqs = append(seqs, m.Seq)
		}
	}
	return seqs
}

func testOrdered(t *testing.T, newT Constructor) {
	tr, boxes := open(t, newT, 1, 2, 3)
	if !tr.Features().Ordered {
		t.Skip("not Ordered")
	}
	b := sendBurst(t, tr, boxes[3], 500)
	for _, s := range b.senderList {
		for lane, ms := range map[string][]*transport.Message{"control": b.ctl, "data": b.data} {
			seqs := b.from(s, ms)
			for i := 1; i < len(seqs); i++ {
				if seqs[i] < seqs[i-1] {
					t.Fatalf("link %d -> 3, %s lane: seq %d arrived after %d", s, lane, seqs[i], seqs[i-1])
				}
			}
		}
	}
}

func testNoDuplicates(t *testing.T, newT Constructor) {
	tr, boxes := open(t, newT, 1, 2, 3)
	if !tr.Features().NoDuplicates {
		t.Skip("duplicates allowed")
	}
	b := sendBurst(t, tr, boxes[3], 500)
	for _, s := range b.senderList {
		seen := map[uint64]bool{}
		for _, seq := range b.from(s, append(slices.Clip(b.ctl), b.data...)) {
			if seen[seq] {
				t.Fatalf("link %d -> 3: seq %d arrived twice", s, seq)
			}
			seen[seq] = true
		}
	}
}

func testLossless(t *testing.T, newT Constructor) {
	tr, boxes := open(t, newT, 1, 2, 3)
	if !tr.Features().Lossless {
		t.Skip("loss allowed")
	}
	b := sendBurst(t, tr, boxes[3], 500)
	for _, s := range b.senderList {
		seen := map[uint64]bool{}
		for _, seq := range b.from(s, append(slices.Clip(b.ctl), b.data...)) {
			seen[seq] = true
		}
		for seq := uint64(1); seq <= uint64(2*b.count); seq++ {
			if !seen[seq] {
				t.Fatalf("link %d -> 3: seq %d never arrived", s, seq)
			}
		}
	}
}

// testControlNotBehindData fills an endpoint's data lane with batches nobody takes,
// then sends control: TakeControl must hand it out while the data waits, and the data
// must still be there (STORM-3637).
func testControlNotBehindData(t *testing.T, newT Constructor) {
	tr, boxes := open(t, newT, 1, 2)
	f := tr.Features()
	in := boxes[2]
	const batches, size = 1000, 64
	seq := uint64(0)
	for b := range batches {
		ts := make([]*tuple.Tuple, size)
		for i := range ts {
			ts[i] = newTuple(SideStream, 1, 2, tuple.Values{int64(b*size + i), uint64(1)})
		}
		seq++
		mustSend(t, tr, &transport.Message{Kind: transport.KindTuples, From: 1, To: 2, Epoch: 1, Seq: seq, Pos: uint64((b + 1) * size), Tuples: ts})
	}
	seq++
	ack := &transport.Message{Kind: transport.KindAcks, From: 1, To: 2, Epoch: 1, Seq: seq, Acks: []acker.Msg{{Kind: acker.Ack, Root: 7, Val: 8}}}
	start := time.Now()
	mustSend(t, tr, ack)
	var ctl []*transport.Message
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		ctl = in.TakeControl(ctl)
		if slices.ContainsFunc(ctl, func(m *transport.Message) bool { return m.Kind == transport.KindAcks && m.Seq == ack.Seq }) {
			break
		}
		select {
		case <-in.Signal():
		case <-tick.C:
			if !f.Lossless {
				mustSend(t, tr, ack)
			}
		case <-deadline.C:
			t.Fatalf("control stuck behind %d batches of data: no acks after %v (%d tuples waiting)", batches, Timeout, in.Tuples())
		}
	}
	t.Logf("control taken %v after it was sent, %d tuples waiting", time.Since(start), in.Tuples())
	if !f.Lossless {
		if in.Tuples() == 0 && len(in.TakeTuples(nil)) == 0 {
			t.Log("every batch was lost (allowed: not Lossless)")
		}
		return
	}
	// Lossless: every batch is (or soon will be) waiting on the data lane.
	var data []*transport.Message
	tuples := 0
	for tuples < batches*size {
		for _, m := range in.TakeTuples(nil) {
			data = append(data, m)
			tuples += len(m.Tuples)
		}
		if tuples >= batches*size {
			break
		}
		select {
		case <-in.Signal():
		case <-deadline.C:
			t.Fatalf("after the control message, %d of %d tuples arrived on the data lane", tuples, batches*size)
		}
	}
	if f.NoDuplicates && (len(data) != batches || tuples != batches*size) {
		t.Fatalf("took %d batches of %d tuples, want %d of %d", len(data), tuples, batches, batches*size)
	}
}

// testShutdown: after Close, Send fails with ErrClosed (counted) and Register fails.
func testShutdown(t *testing.T, newT Constructor) {
	tr := newT(t)
	if _, err := tr.Register(1); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Register(2); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := tr.Stats()
	for i, k := range []transport.Kind{transport.KindTuples, transport.KindAcks, transport.KindEnd, transport.KindControl} {
		err := tr.Send(&transport.Message{Kind: k, From: 1, To: 2, Epoch: 1, Seq: uint64(i + 1)})
		if !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Send(%s) after Close: %v, want an error wrapping ErrClosed", k, err)
		}
	}
	if after := tr.Stats(); after.Errors < before.Errors+4 || after.LastError == "" {
		t.Errorf("Stats after 4 failed sends: Errors %d -> %d, LastError %q", before.Errors, after.Errors, after.LastError)
	}
	if _, err := tr.Register(3); err == nil {
		t.Error("Register after Close succeeded")
	}
}
