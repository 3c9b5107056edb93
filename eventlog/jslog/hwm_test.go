package jslog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/natstest"
)

func appendN(t *testing.T, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := l.Append(context.Background(), rec(fmt.Sprintf("e%d", i), 0, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
}

// seqsOf reads from seq from on to the log's end (Durable) and returns the seqs.
func seqsOf(t *testing.T, l *Log, from uint64) ([]uint64, error) {
	t.Helper()
	recs, err := readTo(t, l, from, l.Durable(), 100)
	var out []uint64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out, err
}

// A record lost from the middle of the stream (nats-server#7549), past the
// committed offset: Read stops before it with ErrLost naming the seq, Damaged
// says so; a salvage records it lost, and then the rest is read and Lost lists it.
func TestGapInTheStream(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	l := open(t, js)
	appendN(t, l, 1, 5)
	if err := l.Apply(&eventlog.Write{}); err != nil { // the mark
		t.Fatal(err)
	}
	if l.Mark() != 5 {
		t.Fatalf("mark %d, want 5", l.Mark())
	}
	if err := l.stream.DeleteMsg(context.Background(), 3); err != nil { // JetStream loses seq 3
		t.Fatal(err)
	}
	got, err := seqsOf(t, l, 1)
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "seqs 3..3") || fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("read: %v, %v; want [1 2] and ErrLost naming seqs 3..3", got, err)
	}
	if derr := l.Damaged(); !errors.Is(derr, ErrLost) {
		t.Fatalf("Damaged: %v", derr)
	}
	// Salvage refuses while a serve process holds the lease.
	if _, err := Salvage(context.Background(), Config{JS: js, Prefix: "t"}, false); err == nil || !strings.Contains(err.Error(), "holds the log spout's lease") {
		t.Fatalf("salvage under a holder: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(context.Background(), Config{JS: js, Prefix: "t"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0].From != 3 || rep.Lost[0].To != 3 || rep.Filled != 0 {
		t.Fatalf("salvage report %+v", rep)
	}
	l2 := open(t, js)
	if lost := l2.Lost(); len(lost) != 1 || lost[0].From != 3 || lost[0].To != 3 {
		t.Fatalf("Lost after the salvage: %+v", lost)
	}
	got, err = seqsOf(t, l2, 1)
	if err != nil || fmt.Sprint(got) != "[1 2 4 5]" || l2.Damaged() != nil {
		t.Fatalf("read after the salvage: %v, %v, damaged %v", got, err, l2.Damaged())
	}
	// A second salvage finds nothing new.
	_ = l2.Close()
	if rep, err := Salvage(context.Background(), Config{JS: js, Prefix: "t"}, false); err != nil || len(rep.Lost) != 0 {
		t.Fatalf("second salvage: %+v %v", rep, err)
	}
}

// Records below the committed offset are trimmed on purpose: no gap.
func TestTrimmedIsNotAGap(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	appendN(t, l, 1, 4)
	if err := l.Apply(&eventlog.Write{Committed: 3}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []uint64{1, 2} {
		if err := l.stream.DeleteMsg(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := seqsOf(t, l, 3); err != nil || fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("read from the offset: %v %v", got, err)
	}
}

// A stream that lost its tail below the high-water mark (nats-server#7567) is
// refused at Open, naming the seqs; a salvage fills the gap with filler records
// and records the range lost, so the next record gets a seq never given out
// before, and Read skips the fillers.
func TestTailBelowTheMark(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	js := openJS(t, url)
	l := open(t, js)
	appendN(t, l, 1, 5)
	if err := l.Apply(&eventlog.Write{}); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	// The stream comes back with only its first two records.
	ctx := context.Background()
	if err := js.DeleteStream(ctx, "t-log"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "t-log", Subjects: []string{"t.log.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		r := rec(fmt.Sprintf("e%d", i), 0, `{}`)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "t.log." + base64.RawURLEncoding.EncodeToString([]byte(r.Event.ID)), Data: r.Encode(nil)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(ctx, Config{JS: js, Prefix: "t", Timeout: 5 * time.Second})
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "seqs 3..5") || !strings.Contains(err.Error(), "ends at seq 2") {
		t.Fatalf("Open of a stream below its mark: %v", err)
	}
	rep, err := Salvage(ctx, Config{JS: js, Prefix: "t"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Filled != 3 || len(rep.Lost) != 1 || rep.Lost[0].From != 3 || rep.Lost[0].To != 5 {
		t.Fatalf("salvage report %+v", rep)
	}
	l2 := open(t, js)
	n := rec("new", 0, `{}`)
	if err := l2.Append(ctx, n); err != nil || n.Seq != 6 {
		t.Fatalf("a new record after the salvage: seq %d, %v; want 6", n.Seq, err)
	}
	if got, err := seqsOf(t, l2, 1); err != nil || fmt.Sprint(got) != "[1 2 6]" {
		t.Fatalf("read after the salvage: %v %v; want [1 2 6] (fillers skipped)", got, err)
	}
}
