package kafka

import (
	"testing"
	"time"
)

// TestTracker drives one partition's tracker through a table of steps and checks
// the committed offset after each: it never passes a record that is buffered, in
// flight, waiting for a replay or for its dead letter, and gaps in offsets
// (compaction, transaction markers) are passed over.
func TestTracker(t *testing.T) {
	t0 := time.Unix(0, 0)
	type step struct {
		op        string // read, emit, ack, fail, dead, dlqok, dlqfail
		off       int64
		at        time.Duration
		want      readAction // for read
		committed int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"prefix stops at the first unacked", []step{
			{op: "read", off: 0, want: actEmit, committed: 0},
			{op: "read", off: 1, want: actEmit, committed: 0},
			{op: "read", off: 2, want: actEmit, committed: 0},
			{op: "emit", off: 0, committed: 0}, {op: "emit", off: 1, committed: 0}, {op: "emit", off: 2, committed: 0},
			{op: "ack", off: 2, committed: 0},
			{op: "ack", off: 1, committed: 0},
			{op: "ack", off: 0, committed: 3},
		}},
		{"gaps are passed over", []step{
			{op: "read", off: 10, want: actEmit, committed: 10},
			{op: "read", off: 13, want: actEmit, committed: 10},
			{op: "emit", off: 10, committed: 10}, {op: "emit", off: 13, committed: 10},
			{op: "ack", off: 10, committed: 13},
			{op: "ack", off: 13, committed: 14},
		}},
		{"a failed record holds the prefix and is re-read when due", []step{
			{op: "read", off: 0, want: actEmit, committed: 0},
			{op: "read", off: 1, want: actEmit, committed: 0},
			{op: "emit", off: 0, committed: 0}, {op: "emit", off: 1, committed: 0},
			{op: "ack", off: 1, committed: 0},
			{op: "fail", off: 0, at: 10 * time.Millisecond, committed: 0},
			{op: "read", off: 0, at: 5 * time.Millisecond, want: actSkip, committed: 0}, // not due yet
			{op: "read", off: 1, at: 5 * time.Millisecond, want: actSkip, committed: 0}, // acked
			{op: "read", off: 0, at: 10 * time.Millisecond, want: actEmit, committed: 0},
			{op: "read", off: 0, at: 10 * time.Millisecond, want: actSkip, committed: 0}, // already buffered
			{op: "emit", off: 0, committed: 0},
			{op: "ack", off: 0, committed: 2},
			{op: "read", off: 0, want: actSkip, committed: 2},
		}},
		{"out of attempts goes to the dead letter, then the partition moves on", []step{
			{op: "read", off: 0, want: actEmit, committed: 0},
			{op: "emit", off: 0, committed: 0},
			{op: "fail", off: 0, committed: 0},
			{op: "read", off: 0, at: 10 * time.Millisecond, want: actEmit, committed: 0},
			{op: "emit", off: 0, committed: 0},
			{op: "fail", off: 0, committed: 0}, // second attempt of max 2: dead
			{op: "read", off: 0, want: actDeadLetter, committed: 0},
			{op: "dlqfail", off: 0, committed: 0},
			{op: "read", off: 0, want: actDeadLetter, committed: 0},
			{op: "dlqok", off: 0, committed: 1},
		}},
		{"stale acks and fails change nothing", []step{
			{op: "read", off: 0, want: actEmit, committed: 0},
			{op: "ack", off: 0, committed: 0}, // never emitted
			{op: "fail", off: 0, committed: 0},
			{op: "emit", off: 0, committed: 0},
			{op: "ack", off: 0, committed: 1},
			{op: "ack", off: 0, committed: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "read":
					if got := tr.read(s.off, now); got != s.want {
						t.Fatalf("step %d: read(%d) = %d, want %d", i, s.off, got, s.want)
					}
				case "emit":
					tr.emitted(s.off)
				case "ack":
					tr.ack(s.off)
				case "fail":
					tr.fail(s.off, "boom", t0.Add(10*time.Millisecond), 2)
				case "dlqok":
					tr.deadLettered(s.off, true)
				case "dlqfail":
					tr.deadLettered(s.off, false)
				}
				if got := tr.committed(); got != s.committed {
					t.Fatalf("step %d (%s %d): committed = %d, want %d", i, s.op, s.off, got, s.committed)
				}
			}
		})
	}
}
