package ingesttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/ingest"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	if f.failed == "" {
		f.failed = fmt.Sprintf(format, args...)
	}
}

// statuses answers from a script: each id's statuses in turn, the last one kept.
func statuses(script map[string][]ingest.Status) StatusFunc {
	calls := map[string]int{}
	return func(id string) (ingest.EventStatus, bool, error) {
		s, ok := script[id]
		if !ok {
			return ingest.EventStatus{}, false, nil
		}
		i := min(calls[id], len(s)-1)
		calls[id]++
		return ingest.EventStatus{EventID: id, Status: s[i], Attempts: 1}, true, nil
	}
}

func TestWaitProcessedReturnsTheStatuses(t *testing.T) {
	f := statuses(map[string][]ingest.Status{
		"a": {ingest.Persisted, ingest.Persisted, ingest.Processed},
		"b": {ingest.Processed},
	})
	got := WaitProcessed(t, time.Minute, f, []string{"a", "b"})
	if len(got) != 2 || got["a"].Status != ingest.Processed || got["b"].Status != ingest.Processed {
		t.Fatalf("got %+v", got)
	}
}

func TestWaitProcessedFailsAtFailedFinal(t *testing.T) {
	ft := &fakeT{TB: t}
	f := statuses(map[string][]ingest.Status{"a": {ingest.Persisted, ingest.FailedFinal}})
	WaitProcessed(ft, time.Minute, f, []string{"a"})
	if !strings.Contains(ft.failed, "a is FAILED_FINAL") {
		t.Fatalf("failure %q", ft.failed)
	}
}

func TestWaitProcessedNamesTheFirstNotProcessed(t *testing.T) {
	ft := &fakeT{TB: t}
	f := statuses(map[string][]ingest.Status{"a": {ingest.Processed}, "b": {ingest.Persisted}})
	WaitProcessed(ft, 20*time.Millisecond, f, []string{"a", "b", "c"})
	if !strings.Contains(ft.failed, "b still PERSISTED (1 of 3 are PROCESSED)") {
		t.Fatalf("failure %q", ft.failed)
	}
}
