package acker

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestLedgerDataDriven runs the scripts in testdata/: each command is one message (or a
// rotation) and the expected output is what the ledger reports.
//
//	init root=R val=V task=T t=NOW   ack root=R val=V t=NOW   fail root=R t=NOW
//	reset root=R t=NOW   rotate   stats   lookup root=R
//
// NOW and the latencies printed are in milliseconds.
func TestLedgerDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var l *Ledger
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(key string) uint64 {
				a, ok := d.Arg(key)
				if !ok {
					if key == "t" {
						return 0
					}
					d.Fatalf(t, "%s: missing %s=", d.Cmd, key)
				}
				v, err := strconv.ParseUint(a.Vals[0], 0, 64)
				if err != nil {
					d.Fatalf(t, "%s: bad %s: %v", d.Cmd, key, err)
				}
				return v
			}
			if d.Cmd == "new" {
				l = New(int(arg("buckets")))
				return "ok"
			}
			if l == nil {
				l = New(3)
			}
			var m Msg
			switch d.Cmd {
			case "init":
				m = Msg{Kind: Init, Root: arg("root"), Val: arg("val"), Task: int32(arg("task"))}
			case "ack":
				m = Msg{Kind: Ack, Root: arg("root"), Val: arg("val")}
			case "fail":
				m = Msg{Kind: Fail, Root: arg("root")}
			case "reset":
				m = Msg{Kind: Reset, Root: arg("root")}
			case "kind":
				m = Msg{Kind: Kind(arg("k")), Root: arg("root")}
			case "rotate":
				exp, orph := l.Rotate()
				return fmt.Sprintf("expired=%d orphans=%d pending=%d", exp, orph, l.Pending())
			case "stats":
				s := l.Stats()
				return fmt.Sprintf("pending=%d unmatched=%d completed=%d failed=%d resets=%d expired=%d orphans=%d",
					s.Pending, s.Unmatched, s.Completed, s.Failed, s.Resets, s.Expired, s.Orphans)
			case "lookup":
				x, task, ok := l.Lookup(arg("root"))
				if !ok {
					return "absent"
				}
				return fmt.Sprintf("xor=%d task=%d", x, task)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			o, ok, err := l.Step(int64(arg("t"))*1e6, m)
			switch {
			case err != nil:
				return "error: " + err.Error()
			case !ok:
				return fmt.Sprintf("- pending=%d", l.Pending())
			}
			return fmt.Sprintf("%s root=%d task=%d latency=%d pending=%d", o.Result, o.Root, o.SpoutTask, o.Latency/1e6, l.Pending())
		})
	})
}

// tree is a random tuple tree: tuple i>0 has parent[i] < i. Edge ids are random.
type tree struct {
	parent []int
	edge   []uint64
}

func randomTree(r *rand.Rand, n int) tree {
	tr := tree{parent: make([]int, n), edge: make([]uint64, n)}
	for i := range n {
		tr.edge[i] = r.Uint64() | 1 // nonzero, as the runtime draws them
		if i > 0 {
			// Bias towards recent parents so that trees are deep as well as wide.
			lo := max(0, i-50)
			tr.parent[i] = lo + r.IntN(i-lo)
		}
	}
	return tr
}

// messages returns the init (for the root tuple) and one ack per tuple, as the runtime
// would send them: a tuple's ack carries its own edge XOR the edges of its children.
func (tr tree) messages(root uint64, task int32) []Msg {
	ackVal := make([]uint64, len(tr.edge))
	for i := 1; i < len(tr.edge); i++ {
		ackVal[tr.parent[i]] ^= tr.edge[i]
	}
	msgs := []Msg{{Kind: Init, Root: root, Val: tr.edge[0], Task: task}}
	for i := range tr.edge {
		msgs = append(msgs, Msg{Kind: Ack, Root: root, Val: tr.edge[i] ^ ackVal[i]})
	}
	return msgs
}

// TestLedgerRandomTreesCompleteOnLastAck: trees of 10,000+ tuples, with the init and the
// acks in random order, complete exactly when the last message arrives, never before.
func TestLedgerRandomTreesCompleteOnLastAck(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n := 10_000 + r.IntN(5_000)
		tr := randomTree(r, n)
		root := r.Uint64() | 1
		msgs := tr.messages(root, 7)
		r.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
		l := New(3)
		for i, m := range msgs {
			o, ok, err := l.Step(int64(i)*1e6, m)
			if err != nil {
				t.Fatal(err)
			}
			last := i == len(msgs)-1
			if ok != last {
				t.Fatalf("trial %d (%d tuples): outcome=%v at message %d of %d", trial, n, ok, i+1, len(msgs))
			}
			if last {
				if o.Result != Completed || o.Root != root || o.SpoutTask != 7 || o.Latency != int64(i)*1e6 {
					t.Fatalf("trial %d: final outcome %+v", trial, o)
				}
			}
		}
		if l.Pending() != 0 {
			t.Fatalf("trial %d: %d entries left", trial, l.Pending())
		}
	}
}

// TestLedgerInterleavedTrees: many trees whose messages are interleaved at random all
// complete, each exactly once and only on its own last message.
func TestLedgerInterleavedTrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type tagged struct {
		Msg
		tree int
	}
	var all []tagged
	remaining := map[uint64]int{}
	roots := make([]uint64, 200)
	for k := range roots {
		roots[k] = r.Uint64() | 1
		tr := randomTree(r, 1+r.IntN(300))
		for _, m := range tr.messages(roots[k], int32(k)) {
			all = append(all, tagged{m, k})
		}
		remaining[roots[k]] = len(tr.edge) + 1
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	l := New(3)
	done := 0
	for i, m := range all {
		remaining[m.Root]--
		o, ok, err := l.Step(int64(i), m.Msg)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (remaining[m.Root] == 0) {
			t.Fatalf("tree %d: outcome=%v with %d messages still to come", m.tree, ok, remaining[m.Root])
		}
		if ok {
			done++
			if o.Result != Completed || o.SpoutTask != int32(m.tree) {
				t.Fatalf("tree %d: outcome %+v", m.tree, o)
			}
		}
	}
	if done != len(roots) || l.Pending() != 0 {
		t.Fatalf("completed %d of %d, %d pending", done, len(roots), l.Pending())
	}
}

func TestKindAndResultNames(t *testing.T) {
	var b strings.Builder
	for _, k := range []Kind{Init, Ack, Fail, Reset, 9} {
		b.WriteString(k.String() + " ")
	}
	for _, r := range []Result{Completed, Failed, Restarted, 9} {
		b.WriteString(r.String() + " ")
	}
	if got, want := b.String(), "init ack fail reset kind(9) complete fail reset result(9) "; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A fail reason reaches the outcome, also when the fail overtakes the init, and is
// forgotten when its orphan entry rotates out.
func TestFailReasonInOutcome(t *testing.T) {
	l := New(3)
	if _, _, err := l.Step(0, Msg{Kind: Init, Root: 1, Val: 5, Task: 2}); err != nil {
		t.Fatal(err)
	}
	o, ok, _ := l.Step(1, Msg{Kind: Fail, Root: 1, Reason: "bad row"})
	if !ok || o.Result != Failed || o.Reason != "bad row" {
		t.Fatalf("outcome %+v %v", o, ok)
	}
	// Fail before init: kept until the init comes.
	if _, ok, _ := l.Step(2, Msg{Kind: Fail, Root: 2, Reason: "first"}); ok {
		t.Fatal("outcome before init")
	}
	l.Step(2, Msg{Kind: Fail, Root: 2, Reason: "second"})
	o, ok, _ = l.Step(3, Msg{Kind: Init, Root: 2, Val: 9, Task: 1})
	if !ok || o.Result != Failed || o.Reason != "first" {
		t.Fatalf("outcome %+v %v, want the first reason", o, ok)
	}
	l.Step(4, Msg{Kind: Fail, Root: 3, Reason: "orphan"})
	for range 3 {
		l.Rotate()
	}
	if len(l.reasons) != 0 {
		t.Fatalf("%d reasons left after the orphan rotated out", len(l.reasons))
	}
}
