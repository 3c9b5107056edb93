package transporttest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/transport"
)

func ackMsg(seq uint64, k transport.Kind) *transport.Message {
	return &transport.Message{Kind: k, From: 1, To: 2, Epoch: 1, Seq: seq, Acks: []acker.Msg{{Kind: acker.Ack, Root: seq}}}
}

// arrived returns the seqs waiting at in, control first.
func arrived(in transport.Inbox) []uint64 {
	var seqs []uint64
	for _, m := range in.TakeControl(nil) {
		seqs = append(seqs, m.Seq)
	}
	for _, m := range in.TakeTuples(nil) {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

func newFaulty(t *testing.T, opts ...FaultOption) (*Faulty, transport.Inbox) {
	t.Helper()
	f := NewFaulty(transport.NewLocal(), opts...)
	t.Cleanup(func() { _ = f.Close() })
	if _, err := f.Register(1); err != nil {
		t.Fatal(err)
	}
	in, err := f.Register(2)
	if err != nil {
		t.Fatal(err)
	}
	return f, in
}

func TestFaultyFeatures(t *testing.T) {
	clone := func(m *transport.Message) (*transport.Message, error) { c := *m; return &c, nil }
	for _, tc := range []struct {
		opts []FaultOption
		want transport.Features
	}{
		{nil, transport.Features{Ordered: true, Lossless: true, NoDuplicates: true}},
		{[]FaultOption{Drop(0.1, transport.KindProbe)}, transport.Features{Ordered: true, NoDuplicates: true}},
		{[]FaultOption{Duplicate(0.1)}, transport.Features{Ordered: true, Lossless: true}},
		{[]FaultOption{Reorder(0.1, 3)}, transport.Features{Lossless: true, NoDuplicates: true}},
		{[]FaultOption{Serialize(clone)}, transport.Features{Ordered: true, Lossless: true, NoDuplicates: true, Serializing: true}},
		{[]FaultOption{Drop(0), Duplicate(0), Reorder(0, 5)}, transport.Features{Ordered: true, Lossless: true, NoDuplicates: true}},
	} {
		if got := NewFaulty(transport.NewLocal(), tc.opts...).Features(); got != tc.want {
			t.Errorf("%d options: Features %+v, want %+v", len(tc.opts), got, tc.want)
		}
	}
}

func TestFaultyDropsByKind(t *testing.T) {
	f, in := newFaulty(t, Drop(1, transport.KindProbe, transport.KindCredit))
	for i, k := range []transport.Kind{transport.KindProbe, transport.KindAcks, transport.KindCredit, transport.KindEnd} {
		if err := f.Send(ackMsg(uint64(i+1), k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := arrived(in); len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("arrived %v, want the acks (2) and the end (4)", got)
	}
	if s := f.Stats(); s.Sent != 4 || s.Dropped != 2 || s.Delivered != 2 {
		t.Fatalf("stats %+v", s)
	}
	// A message for an endpoint not registered through the Faulty is not faulted:
	// the inner transport's error comes back.
	err := f.Send(&transport.Message{Kind: transport.KindProbe, From: 1, To: 9, Seq: 1})
	if !errors.Is(err, transport.ErrUnknownEndpoint) {
		t.Fatalf("probe to an unknown endpoint: %v", err)
	}
}

func TestFaultyDropFraction(t *testing.T) {
	f, in := newFaulty(t, Drop(0.1), Seed(3))
	const n = 10_000
	for i := range n {
		if err := f.Send(ackMsg(uint64(i+1), transport.KindAcks)); err != nil {
			t.Fatal(err)
		}
	}
	got := len(arrived(in))
	if d := f.Faults().Dropped; d < n/10-300 || d > n/10+300 || got != n-int(d) {
		t.Fatalf("dropped %d of %d (%d arrived), want about a tenth", d, n, got)
	}
}

// TestFaultyDeterministic: the same seed and sends give the same faults.
func TestFaultyDeterministic(t *testing.T) {
	run := func(seed int64) ([]uint64, FaultStats) {
		f, in := newFaulty(t, Drop(0.2), Duplicate(0.2), Reorder(0.3, 5), Seed(seed))
		var seqs []uint64
		for i := range 500 {
			if err := f.Send(ackMsg(uint64(i+1), transport.KindAcks)); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, arrived(in)...)
		}
		f.Flush()
		return append(seqs, arrived(in)...), f.Faults()
	}
	a, sa := run(5)
	b, sb := run(5)
	c, _ := run(6)
	if sa != sb || !slices.Equal(a, b) {
		t.Fatalf("seed 5 twice: faults %+v and %+v, arrivals differ", sa, sb)
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 5 and 6 gave the same faults")
	}
	if sa.Dropped == 0 || sa.Duplicated == 0 || sa.Reordered == 0 {
		t.Fatalf("faults %+v: each kind should have happened", sa)
	}
}

func TestFaultyDuplicate(t *testing.T) {
	clones := 0
	clone := func(m *transport.Message) (*transport.Message, error) { clones++; c := *m; return &c, nil }
	for _, opts := range [][]FaultOption{{Duplicate(1)}, {Duplicate(1), Serialize(clone)}} {
		f, in := newFaulty(t, opts...)
		m := ackMsg(1, transport.KindAcks)
		if err := f.Send(m); err != nil {
			t.Fatal(err)
		}
		got := in.TakeControl(nil)
		if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 1 || got[0] == got[1] || got[1] == m {
			t.Fatalf("%d options: took %v, want two copies, the second a new Message", len(opts), got)
		}
		if d := f.Faults().Duplicated; d != 1 {
			t.Fatalf("Duplicated %d", d)
		}
	}
	if clones != 2 {
		t.Fatalf("clone called %d times, want one for each copy", clones)
	}
}

// TestFaultyReorderWindow: a held message is released after 1 to window later sends
// to its endpoint, so after send k every message up to k-window has arrived; Flush
// releases the rest; Close drops what is held.
func TestFaultyReorderWindow(t *testing.T) {
	const window = 4
	f, in := newFaulty(t, Reorder(0.5, window), Seed(9))
	seen := map[uint64]bool{}
	var order []uint64
	reordered := false
	for k := uint64(1); k <= 2000; k++ {
		if err := f.Send(ackMsg(k, transport.KindAcks)); err != nil {
			t.Fatal(err)
		}
		for _, s := range arrived(in) {
			if len(order) > 0 && s < order[len(order)-1] {
				reordered = true
			}
			order = append(order, s)
			seen[s] = true
		}
		for i := uint64(1); i+window <= k; i++ {
			if !seen[i] {
				t.Fatalf("after send %d, message %d (more than %d sends back) is still held", k, i, window)
			}
		}
	}
	if !reordered {
		t.Fatal("nothing was reordered")
	}
	held := f.Held()
	f.Flush()
	if n := len(arrived(in)); n != held || f.Held() != 0 || len(seen)+n != 2000 {
		t.Fatalf("Flush released %d of %d held; %d arrived before", n, held, len(seen))
	}
	// Everything held is dropped at Close, and counted.
	for k := uint64(1); k <= 100; k++ {
		_ = f.Send(ackMsg(3000+k, transport.KindAcks))
	}
	held = f.Held()
	before := f.Faults().Dropped
	_ = f.Close()
	if held == 0 || f.Faults().Dropped != before+uint64(held) {
		t.Fatalf("Close with %d held: Dropped %d -> %d", held, before, f.Faults().Dropped)
	}
	if err := f.Send(ackMsg(5000, transport.KindAcks)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

func TestFaultySerializeError(t *testing.T) {
	boom := errors.New("cannot encode a channel")
	clone := func(m *transport.Message) (*transport.Message, error) {
		if m.Kind == transport.KindControl {
			return nil, boom
		}
		c := *m
		return &c, nil
	}
	f, in := newFaulty(t, Serialize(clone))
	m := ackMsg(1, transport.KindAcks)
	if err := f.Send(m); err != nil {
		t.Fatal(err)
	}
	if got := in.TakeControl(nil); len(got) != 1 || got[0] == m {
		t.Fatalf("took %v, want one clone", got)
	}
	err := f.Send(&transport.Message{Kind: transport.KindControl, From: 1, To: 2, Seq: 2})
	if !errors.Is(err, boom) {
		t.Fatalf("Send of what the clone refuses: %v", err)
	}
	s := f.Stats()
	if s.Errors != 1 || !strings.Contains(s.LastError, "cannot encode") || f.Faults().SerializeErrors != 1 {
		t.Fatalf("stats %+v, faults %+v", s, f.Faults())
	}
	if got := arrived(in); len(got) != 0 {
		t.Fatalf("the refused message arrived: %v", got)
	}
	// A newer error of the inner transport is the LastError now.
	_ = f.Send(&transport.Message{Kind: transport.KindAcks, From: 1, To: 77, Seq: 3})
	if s := f.Stats(); s.Errors != 2 || !strings.Contains(s.LastError, "unknown endpoint") {
		t.Fatalf("after an unknown endpoint: %+v", s)
	}
}
