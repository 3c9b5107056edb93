package flow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestFlowDataDriven replays the scripts in testdata/. Each script drives one edge (a
// Sender and a Receiver, messages between them carried by hand), one Dedupe or one
// Resender; each command prints what the machines did and their state.
//
// Edge (the script carries every message: a batch or grant the script never delivers
// is lost):
//
//	edge window=W            a new edge: NewSender(W), NewReceiver(W)
//	send n=N                 the sender sends a batch of N if it may (prints its pos)
//	receive pos=P n=N        the receiver gets the batch ending at P (N tuples)
//	consume n=N              the receiver executes N tuples (prints a grant if due)
//	credit limit=L           the sender gets a grant
//	probe [pos=P]            the receiver gets a probe (default: the sender's pos)
//	end [pos=P]              the receiver gets end of stream (default: sender's pos)
//	window queue=Q batch=B producers=P
//
// Dedupe:
//
//	dedupe                   a new Dedupe
//	accept epoch=E seq=S,S,...   one Accept per seq, in order
//
// Resender (times in ms; keys are strings):
//
//	resender every=MS
//	sent t=MS key=K,...      acked key=K,...      due t=MS
func TestFlowDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			s   Sender
			r   Receiver
			dd  Dedupe
			res *Resender[string]
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			num := func(key string, def uint64, required bool) uint64 {
				a, ok := d.Arg(key)
				if !ok {
					if required {
						d.Fatalf(t, "%s: missing %s=", d.Cmd, key)
					}
					return def
				}
				v, err := strconv.ParseUint(a.Vals[0], 0, 64)
				if err != nil {
					d.Fatalf(t, "%s: bad %s: %v", d.Cmd, key, err)
				}
				return v
			}
			edge := func() string {
				return fmt.Sprintf("sender pos=%d credit=%d can-send=%v | receiver queued=%d granted=%d ended=%v",
					s.Pos(), s.Limit(), s.CanSend(), r.Queued(), r.Granted(), r.Ended())
			}
			switch d.Cmd {
			case "edge":
				w := num("window", 0, true)
				s, r = NewSender(w), NewReceiver(w)
				return edge()
			case "window":
				return fmt.Sprint(Window(int(num("queue", 0, true)), int(num("batch", 0, true)), int(num("producers", 0, true))))
			case "send":
				if !s.CanSend() {
					return "blocked: " + edge()
				}
				pos := s.Sent(int(num("n", 0, true)))
				return fmt.Sprintf("batch pos=%d: %s", pos, edge())
			case "receive":
				r.Received(num("pos", 0, true), int(num("n", 0, true)))
				return edge()
			case "consume":
				limit, grant := r.Consumed(int(num("n", 0, true)))
				if grant {
					return fmt.Sprintf("grant %d: %s", limit, edge())
				}
				return "no grant: " + edge()
			case "credit":
				if s.Credit(num("limit", 0, true)) {
					return "resumed: " + edge()
				}
				return edge()
			case "probe":
				limit := r.Probe(num("pos", s.Pos(), false))
				return fmt.Sprintf("answer %d: %s", limit, edge())
			case "end":
				r.End(num("pos", s.Pos(), false))
				return edge()

			case "dedupe":
				dd = Dedupe{}
				return "ok"
			case "accept":
				epoch := num("epoch", 0, true)
				a, ok := d.Arg("seq")
				if !ok {
					d.Fatalf(t, "accept: missing seq=")
				}
				var out []string
				for _, v := range a.Vals {
					seq, err := strconv.ParseUint(v, 0, 64)
					if err != nil {
						d.Fatalf(t, "accept: bad seq %q", v)
					}
					verdict := "dup"
					if dd.Accept(epoch, seq) {
						verdict = "new"
					}
					out = append(out, fmt.Sprintf("%d:%s", seq, verdict))
				}
				return strings.Join(out, " ")

			case "resender":
				res = NewResender[string](int64(num("every", 0, true)) * 1e6)
				return "ok"
			case "sent", "acked":
				a, ok := d.Arg("key")
				if !ok {
					d.Fatalf(t, "%s: missing key=", d.Cmd)
				}
				var out []string
				for _, k := range a.Vals {
					if d.Cmd == "sent" {
						res.Sent(int64(num("t", 0, true))*1e6, k)
					} else {
						out = append(out, fmt.Sprintf("%s:%v", k, res.Acked(k)))
					}
				}
				out = append(out, fmt.Sprintf("outstanding=%d", res.Outstanding()))
				return strings.Join(out, " ")
			case "due":
				due := res.Due(int64(num("t", 0, true))*1e6, nil)
				slices.Sort(due)
				if len(due) == 0 {
					return "none"
				}
				return strings.Join(due, " ")
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// TestDedupeSlidingWindow checks Dedupe against a model that remembers everything: a
// message is new exactly when it was never seen and is within DedupeWindow of the
// newest, over long random runs with reordering, duplicates and gaps.
func TestDedupeSlidingWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 50 {
		var d Dedupe
		seen := map[uint64]bool{}
		var top uint64
		next := uint64(1)
		for range 5000 {
			var seq uint64
			switch x := rng.IntN(10); {
			case x < 6: // the next in order, sometimes after a gap
				seq = next
				next += 1 + uint64(rng.IntN(3)/2)*uint64(rng.IntN(2*DedupeWindow))
			default: // a reordered or duplicate message, up to two windows old
				back := uint64(rng.IntN(2 * DedupeWindow))
				if back >= next {
					back = next - 1
				}
				seq = max(next-back, 1)
			}
			want := !seen[seq] && (seq > top || top-seq < DedupeWindow)
			if got := d.Accept(5, seq); got != want {
				t.Fatalf("trial %d: Accept(seq=%d) with newest %d = %v, want %v", trial, seq, top, got, want)
			}
			if want {
				seen[seq] = true
				top = max(top, seq)
			}
		}
	}
}

// simMsg is one message on the simulated edge's channel.
type simMsg struct {
	kind     string // batch, credit, probe, end, endack
	seq      uint64 // producer -> consumer messages (deduplicated by the consumer)
	pos      uint64
	n        int
	batch    int // index into sim.batches (kind batch)
	arrivals int
}

// simBatch is a batch the producer sent: its tuples are positions pos-n+1..pos.
type simBatch struct {
	pos     uint64
	n       int
	copies  int  // copies still on the channel
	arrived bool // a copy was accepted
}

// TestEdgeOverLossyChannel runs one edge at a time through a channel that drops,
// duplicates and reorders every kind of message, driving the machines as the engine
// does: the producer sends while it has credit, probes every tick while it has none,
// and, once it has sent everything, sends End every tick until acknowledged; the
// consumer deduplicates what the producer sends, answers every probe and every end,
// and executes tuples at random. Every run must finish within its step bound (the
// producer's end acknowledged, the consumer's input ended and its queue empty), every
// tuple must be executed at most once and either executed or in a batch whose every
// copy was lost, and the consumer must never hold more than its window plus one batch
// plus the tuples that arrived after a probe, a later batch or the end had written
// them off (batches that were in flight, not lost).
func TestEdgeOverLossyChannel(t *testing.T) {
	type faults struct{ drop, dup, reorder float64 }
	for _, f := range []faults{{0, 0, 0}, {0.1, 0, 0}, {0, 0.1, 0.3}, {0.2, 0.1, 0.3}, {0.5, 0.2, 0.5}} {
		for seed := range uint64(60) {
			name := fmt.Sprintf("drop=%v/dup=%v/reorder=%v/seed=%d", f.drop, f.dup, f.reorder, seed)
			simulateEdge(t, name, seed, f.drop, f.dup, f.reorder)
		}
	}
}

func simulateEdge(t *testing.T, name string, seed uint64, drop, dup, reorder float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	window := uint64(1 + rng.IntN(20))
	maxBatch := 1 + rng.IntN(12)
	total := 20 + rng.IntN(400)
	const tick = 8 // steps between the producer's ticks
	const maxSteps = 400_000

	snd, rcv := NewSender(window), NewReceiver(window)
	var dd Dedupe
	ends := NewResender[string](tick)
	var (
		toConsumer, toProducer []simMsg
		batches                []simBatch
		seq                    uint64
		sent                   int // tuples sent
		endSent, endAcked      bool
		held                   []int // batch index per held tuple, in arrival order
		executed               = make([]int, total+1)
		late                   uint64
		highest                uint64 // what the receiver has heard of (for "late")
	)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s (window=%d maxBatch=%d total=%d): %s\nsender pos=%d credit=%d; receiver queued=%d granted=%d ended=%v; sent=%d endAcked=%v in flight %d/%d",
			name, window, maxBatch, total, fmt.Sprintf(format, args...), snd.Pos(), snd.Limit(), rcv.Queued(), rcv.Granted(), rcv.Ended(),
			sent, endAcked, len(toConsumer), len(toProducer))
	}
	// put puts m on a channel, dropping or duplicating it.
	put := func(ch *[]simMsg, m simMsg) {
		copies := 1
		if rng.Float64() < dup {
			copies = 2
		}
		for range copies {
			if rng.Float64() < drop {
				continue
			}
			if m.kind == "batch" {
				batches[m.batch].copies++
			}
			*ch = append(*ch, m)
		}
	}
	// take takes the next message off a channel: the oldest, or one at random.
	take := func(ch *[]simMsg) simMsg {
		i := 0
		if rng.Float64() < reorder {
			i = rng.IntN(len(*ch))
		}
		m := (*ch)[i]
		*ch = slices.Delete(*ch, i, i+1)
		return m
	}
	toP := func(m simMsg) { put(&toProducer, m) }
	toC := func(m simMsg) {
		seq++
		m.seq = seq
		put(&toConsumer, m)
	}

	step := 0
	for ; step < maxSteps; step++ {
		if endAcked && rcv.Ended() && rcv.Queued() == 0 {
			break
		}
		now := int64(step)
		switch x := rng.IntN(10); {
		case x < 3: // the producer works
			if sent < total && snd.CanSend() {
				n := min(1+rng.IntN(maxBatch), total-sent)
				pos := snd.Sent(n)
				sent += n
				batches = append(batches, simBatch{pos: pos, n: n})
				toC(simMsg{kind: "batch", pos: pos, n: n, batch: len(batches) - 1})
			}
			if sent == total && !endSent {
				endSent = true
				toC(simMsg{kind: "end", pos: snd.Pos()})
				ends.Sent(now, "end")
			}
		case x < 6: // a message reaches the consumer
			if len(toConsumer) == 0 {
				continue
			}
			m := take(&toConsumer)
			if !dd.Accept(1, m.seq) {
				if m.kind == "batch" {
					batches[m.batch].copies--
				}
				continue
			}
			switch m.kind {
			case "batch":
				b := &batches[m.batch]
				b.copies--
				if b.arrived {
					fail("batch %d accepted twice", b.pos)
				}
				b.arrived = true
				if b.pos <= highest {
					late += uint64(b.n)
				}
				highest = max(highest, b.pos)
				rcv.Received(b.pos, b.n)
				for range b.n {
					held = append(held, m.batch)
				}
			case "probe":
				highest = max(highest, m.pos)
				toP(simMsg{kind: "credit", pos: rcv.Probe(m.pos)})
			case "end":
				highest = max(highest, m.pos)
				rcv.End(m.pos)
				toP(simMsg{kind: "endack"})
			}
			if bound := window + uint64(maxBatch) - 1 + late; rcv.Queued() > bound {
				fail("the receiver holds %d tuples, over window %d + batch %d - 1 + late %d", rcv.Queued(), window, maxBatch, late)
			}
			if int(rcv.Queued()) != len(held) {
				fail("receiver queued %d, simulation holds %d", rcv.Queued(), len(held))
			}
		case x < 8: // a message reaches the producer
			if len(toProducer) == 0 {
				continue
			}
			switch m := take(&toProducer); m.kind {
			case "credit":
				snd.Credit(m.pos)
			case "endack":
				endAcked = true
				ends.Acked("end")
			}
		default: // the consumer executes some tuples
			n := min(rng.IntN(2*maxBatch+1), len(held))
			for _, bi := range held[:n] {
				b := batches[bi]
				// Tuples of one batch are executed in order: count per position.
				executed[int(b.pos)-b.n+1+countExecuted(executed, b)]++
			}
			held = held[n:]
			if limit, ok := rcv.Consumed(n); ok {
				toP(simMsg{kind: "credit", pos: limit})
			}
		}
		if step%tick == 0 {
			if sent < total && !snd.CanSend() {
				toC(simMsg{kind: "probe", pos: snd.Pos()})
			}
			for range ends.Due(now, nil) {
				toC(simMsg{kind: "end", pos: snd.Pos()})
			}
		}
	}
	if step == maxSteps {
		fail("no end after %d steps", maxSteps)
	}
	// Deliver what is still on the channel (copies of batches already accepted or
	// written off): none may be accepted twice.
	for len(toConsumer) > 0 {
		m := take(&toConsumer)
		if m.kind == "batch" {
			batches[m.batch].copies--
			if dd.Accept(1, m.seq) && batches[m.batch].arrived {
				fail("a late copy of batch %d accepted", batches[m.batch].pos)
			}
		}
	}
	for _, b := range batches {
		for p := int(b.pos) - b.n + 1; p <= int(b.pos); p++ {
			switch {
			case executed[p] > 1:
				fail("tuple %d executed %d times", p, executed[p])
			case executed[p] == 0 && b.arrived:
				fail("tuple %d arrived and was never executed", p)
			case executed[p] == 1 && !b.arrived:
				fail("tuple %d executed but its batch never arrived", p)
			}
		}
	}
	if drop == 0 && dup == 0 {
		for p := 1; p <= total; p++ {
			if executed[p] != 1 {
				fail("lossless: tuple %d executed %d times", p, executed[p])
			}
		}
	}
}

// countExecuted is how many tuples of b have been executed so far.
func countExecuted(executed []int, b simBatch) int {
	c := 0
	for p := int(b.pos) - b.n + 1; p <= int(b.pos); p++ {
		c += executed[p]
	}
	return c
}
