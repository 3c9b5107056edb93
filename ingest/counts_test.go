package ingest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/internal/waitfor"
)

// TestCountsByStatusSourceAndLevel: over real HTTP, the counts per source and
// status, per ack level and answered status, duplicates, attempt failures and
// dead letters are exact.
func TestCountsByStatusSourceAndLevel(t *testing.T) {
	sink := newSink(func(id string) int {
		switch id {
		case "b-flaky":
			return 1 // one failed attempt, then processed
		case "b-bad":
			return 1000 // dead-lettered after 2 attempts
		}
		return 0
	})
	r := startRig(t, vfs.NewMem(), sink, Config{Tracker: TrackerConfig{MaxAttempts: 2, BackoffBase: time.Millisecond}})
	line := func(id, source string) string {
		return fmt.Sprintf(`{"event_id":%q,"source":%q,"type":"t","payload":{}}`, id, source)
	}
	batch := strings.Join([]string{line("a-1", "a"), line("a-2", "a"), line("a-3", "a"), line("b-flaky", "b"),
		`{"event_id":"bad-line","source":"b"}`}, "\n")
	if code, _, b := r.post("/v1/events:batch?ack=processed", batch); code != 200 {
		t.Fatalf("batch: %d %s", code, b)
	}
	if code, _, b := r.post("/v1/events?ack=processed", line("b-bad", "b")); code != 422 {
		t.Fatalf("b-bad: %d %s", code, b)
	}
	if code, _, b := r.post("/v1/events?ack=persisted", line("a-1", "a")); code != 200 || !strings.Contains(string(b), `"duplicate":true`) {
		t.Fatalf("resend of a-1: %d %s", code, b)
	}
	if code, _, b := r.post("/v1/events?ack=accepted", line("c-1", "c")); code != 202 {
		t.Fatalf("c-1: %d %s", code, b)
	}
	// c-1 was answered ACCEPTED: wait for its PROCESSED to be counted.
	waitfor.Until(t, 10*time.Second, func() error {
		if c := r.svc.Counts().Events["c"]; c.ByStatus[Processed] != 1 {
			return fmt.Errorf("c-1 not counted PROCESSED: %+v", c)
		}
		return nil
	})
	c := r.svc.Counts()
	want := map[string]map[Status]uint64{
		"a": {Accepted: 3, Persisted: 3, Processed: 3},
		"b": {Accepted: 2, Persisted: 2, Processed: 1, FailedFinal: 1},
		"c": {Accepted: 1, Persisted: 1, Processed: 1},
	}
	if len(c.Events) != len(want) {
		t.Errorf("sources counted %v, want a, b and c", c.Events)
	}
	for src, byStatus := range want {
		for _, st := range Statuses {
			if got := c.Events[src].ByStatus[st]; got != byStatus[st] {
				t.Errorf("source %s %s = %d, want %d", src, st, got, byStatus[st])
			}
		}
	}
	if f := c.Events["b"].AttemptFailures; f != 2 { // b-flaky's first attempt, b-bad's first
		t.Errorf("source b attempt failures = %d, want 2", f)
	}
	answers := map[string]uint64{}
	for _, a := range c.Answers {
		if a.N > 0 {
			answers[a.Level.String()+"/"+a.Status.String()] = a.N
		}
	}
	wantAnswers := map[string]uint64{"processed/PROCESSED": 4, "processed/FAILED_FINAL": 2, "persisted/PROCESSED": 1, "accepted/ACCEPTED": 1}
	if fmt.Sprint(answers) != fmt.Sprint(wantAnswers) {
		t.Errorf("answers = %v, want %v", answers, wantAnswers)
	}
	if len(c.Answers) != len(Levels)*len(Statuses) {
		t.Errorf("%d answer series, want every level and status", len(c.Answers))
	}
	if c.Duplicates != 1 {
		t.Errorf("duplicates = %d, want 1", c.Duplicates)
	}
	if n, err := r.svc.DeadLetterCount(); err != nil || n != 1 {
		t.Errorf("DeadLetterCount = %d, %v; want 1", n, err)
	}
}

// TestCountedSourcesBounded: sources past MaxCountedSources share OtherSource, so a
// client inventing sources cannot grow the metrics without bound.
func TestCountedSourcesBounded(t *testing.T) {
	s := &Service{}
	for i := range MaxCountedSources + 5 {
		s.counts.source(fmt.Sprintf("s%d", i)).status[Accepted].Add(1)
	}
	s.counts.source("s0").status[Accepted].Add(1)
	got := s.Counts().Events
	if len(got) != MaxCountedSources+1 || got[OtherSource].ByStatus[Accepted] != 5 || got["s0"].ByStatus[Accepted] != 2 {
		t.Errorf("%d sources, %s = %d, s0 = %d; want %d, 5 and 2", len(got), OtherSource,
			got[OtherSource].ByStatus[Accepted], got["s0"].ByStatus[Accepted], MaxCountedSources+1)
	}
}
