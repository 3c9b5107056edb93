package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The warning gate, step by step on a fake time: each step is a warning of a key at a
// time (seconds since the start), and whether it is logged with the number not
// logged since that key's line before; "stop" is the stop's count of those not
// logged since their key's last line.
func TestWarnGate(t *testing.T) {
	type step struct {
		at         float64 // seconds
		comp, kind string
		want       string // "logged N" (N not logged before it), "-" (not logged), or for stop the lines
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"the first is logged, the rest of 10 s only counted", []step{
			{0, "split", "refused-emit", "logged 0"},
			{0, "split", "refused-emit", "-"},
			{9.999, "split", "refused-emit", "-"},
			{10, "split", "refused-emit", "logged 2"},
			{10, "split", "refused-emit", "-"},
			{25, "split", "refused-emit", "logged 1"},
			{25, "", "stop", ""},
		}},
		{"components and kinds are limited apart", []step{
			{1, "split", "refused-emit", "logged 0"},
			{1, "split", "bolt-error", "logged 0"},
			{1, "count", "refused-emit", "logged 0"},
			{2, "split", "refused-emit", "-"},
			{2, "split", "bolt-error", "-"},
			{2, "split", "bolt-error", "-"},
			{3, "count", "double-ack", "logged 0"},
			{4, "", "stop", "split/bolt-error 2, split/refused-emit 1"},
			{4, "", "stop", ""}, // counted once
		}},
		{"a quiet key is logged at once, with no count", []step{
			{0, "a", "double-ack", "logged 0"},
			{3600, "a", "double-ack", "logged 0"},
			{3600.5, "a", "double-ack", "-"},
			{3601, "", "stop", "a/double-ack 1"},
			{3615, "a", "double-ack", "logged 0"}, // the stop's line reported the one before
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := warnGate{every: int64(warnEvery)}
			for i, s := range tc.steps {
				now := int64(s.at * float64(time.Second))
				var got string
				if s.kind == "stop" {
					var parts []string
					for _, c := range g.unreported() {
						parts = append(parts, fmt.Sprintf("%s/%s %d", c.comp, c.kind, c.n))
					}
					got = strings.Join(parts, ", ")
				} else if ok, n := g.pass(warnKey{s.comp, s.kind}, now); ok {
					got = fmt.Sprintf("logged %d", n)
				} else {
					got = "-"
				}
				if got != s.want {
					t.Fatalf("step %d (%+v): %q, want %q", i, s, got, s.want)
				}
			}
		})
	}
}

// The tree watch: trees failing or timing out are warned about when more than 100
// (10 a second) came in the 10 s up to now, at most once per 10 s, with the window's
// counts by reason.
func TestTreeWatch(t *testing.T) {
	type step struct {
		at       float64 // seconds
		n        uint64  // trees added (0: only a check)
		reason   string
		timedOut bool
		want     string // "-": no warning; else the report
	}
	const to = "message timeout: tree not complete after 30s"
	cases := []struct {
		name  string
		steps []step
	}{
		{"100 in 10 s is not more than 10 a second; 101 is", []step{
			{0, 50, to, true, "-"},
			{9.5, 50, to, true, "-"},
			{9.9, 1, "bad row", false, "failed 1 timed out 100: message timeout: tree not complete after 30s (100); bad row (1)"},
		}},
		{"the window slides: what is 10 s old is out", []step{
			{0, 60, to, true, "-"},
			{10, 60, to, true, "-"}, // the first 60 are out of the window
			{10.5, 0, "", false, "-"},
			{19.9, 41, to, true, "failed 0 timed out 101: message timeout: tree not complete after 30s (101)"},
		}},
		{"at most once per 10 s, then the window's counts again", []step{
			{0, 200, "", false, "failed 200 timed out 0:  (200)"},
			{1, 200, "", false, "-"},
			{9.999, 0, "", false, "-"},
			{10, 0, "", false, "failed 200 timed out 0:  (200)"}, // the second 0 is out
			{20, 0, "", false, "-"},                              // nothing in the last 10 s
			{25, 150, "x", false, "failed 150 timed out 0: x (150)"},
		}},
		{"reasons past the bound are counted together", []step{
			{0, 12, "r1", false, "-"}, {0, 12, "r2", false, "-"}, {0, 12, "r3", false, "-"},
			{0, 12, "r4", false, "-"}, {0, 12, "r5", false, "-"}, {0, 12, "r6", false, "-"},
			{0, 12, "r7", false, "-"}, {0, 12, "r8", false, "-"},
			{0.5, 12, "r9", false, "failed 108 timed out 0: (other reasons) (12); r1 (12); r2 (12); r3 (12); r4 (12); r5 (12); r6 (12); r7 (12); r8 (12)"},
			{10.5, 20, "r9", false, "-"}, {10.5, 200, "r10", false, "failed 220 timed out 0: r10 (200); r9 (20)"},
			{11, 0, "", false, "-"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w treeWatch
			for i, s := range tc.steps {
				now := int64(s.at * float64(time.Second))
				if s.n > 0 {
					w.add(now, s.reason, s.timedOut, s.n)
				}
				got := "-"
				if r, ok := w.due(now); ok {
					var parts []string
					for _, rc := range r.reasons {
						parts = append(parts, fmt.Sprintf("%s (%d)", rc.reason, rc.n))
					}
					got = fmt.Sprintf("failed %d timed out %d: %s", r.failed, r.timedOut, strings.Join(parts, "; "))
				}
				if got != s.want {
					t.Fatalf("step %d (%+v): %q, want %q", i, s, got, s.want)
				}
			}
		})
	}
}
