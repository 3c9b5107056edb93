package sink

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// The sink is unavailable while any task is down; each change of availability (and
// only a change) closes Changed, counts an outage when it begins, and logs one line.
func TestHealthChangesOncePerState(t *testing.T) {
	var logs bytes.Buffer
	h := NewHealth(slog.New(slog.NewTextHandler(&logs, nil)))
	db := &DB{name: "sqlite:x.db"}
	full, locked := errors.New("database or disk is full (13)"), errors.New("database is locked (5)")
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if err := h.Err(); err != nil {
		t.Fatalf("a new Health: %v", err)
	}
	ch := h.Changed()
	h.report(2, full, db)
	if !closed(ch) {
		t.Fatal("Changed not closed when the first task went down")
	}
	ch = h.Changed()
	h.report(1, locked, db) // a second task down: no change
	h.report(2, full, db)   // a failed retry: no change
	h.report(2, nil, db)    // task 1 still down
	if closed(ch) {
		t.Fatal("Changed closed while the sink stayed unavailable")
	}
	err := h.Err()
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locked) {
		t.Fatalf("Err = %v, want ErrUnavailable wrapping task 1's error", err)
	}
	h.report(1, nil, db)
	if !closed(ch) || h.Err() != nil {
		t.Fatalf("not available after every task wrote: %v", h.Err())
	}
	h.report(1, nil, db) // still available: nothing
	if st := h.State(); !st.Available || st.Outages != 1 || st.Reason != nil {
		t.Fatalf("state %+v", st)
	}
	if n := strings.Count(logs.String(), "sink unavailable"); n != 1 {
		t.Errorf("%d 'sink unavailable' lines, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "sink available again"); n != 1 {
		t.Errorf("%d 'sink available again' lines, want 1:\n%s", n, logs.String())
	}
}
