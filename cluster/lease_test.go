package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A scheduler whose lease expired (paused) is fenced off: its write is refused
// even when it carries the key's current revision, which both schedulers read, so
// a compare-and-set on the key alone would have let it through.
func TestFenceRefusesStaleTerm(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	a := openStore(t, url, Config{Prefix: prefix})
	b := openStore(t, url, Config{Prefix: prefix})
	ctx := ctxT(t, 30*time.Second)
	gone, stopWatch, err := b.watch(ctx, b.lease, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatch()

	la, lb := &Lease{Holder: "a", Incarnation: "A"}, &Lease{Holder: "b", Incarnation: "B"}
	ra, err := a.acquire(ctx, la)
	if err != nil {
		t.Fatal(err)
	}
	ta, err := a.fence(ctx, la, ra)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := a.write(ctx, ta, "wc", []byte(`{"topology":"wc","spec":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	rx, err := a.write(ctx, ta, "x", []byte(`{"topology":"x","spec":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(ctx, lb); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("b took a lease a holds: %v", err)
	}

	// a stops renewing: the server removes its lease a TTL later; b sees it go.
	var created, expired time.Time
	for expired.IsZero() {
		select {
		case e := <-gone.Updates():
			switch {
			case e == nil:
			case isGone(e):
				expired = e.Created()
			default:
				created = e.Created()
			}
		case <-ctx.Done():
			t.Fatal("a's lease did not expire")
		}
	}
	if d := expired.Sub(created); d < testTTL {
		t.Errorf("a's lease expired %v after it was written, before the TTL of %v", d, testTTL)
	}
	rb, err := b.acquire(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	if rb <= ra {
		t.Fatalf("b's lease revision %d is not after a's %d", rb, ra)
	}
	tb, err := b.fence(ctx, lb, rb)
	if err != nil {
		t.Fatal(err)
	}

	// Both have read wc at revision rw. a's write is refused by the fence.
	e, err := b.assignments.Get(ctx, "wc")
	if err != nil || e.Revision() != rw {
		t.Fatalf("wc: %v at revision %d, want %d", err, e.Revision(), rw)
	}
	if _, err := a.write(ctx, ta, "wc", []byte(`{"topology":"wc","spec":2}`), rw); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's stale write: %v, want ErrFenced", err)
	}
	if _, err := a.write(ctx, ta, "x", []byte(`{"topology":"x","spec":2}`), rx); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's stale write of x: %v, want ErrFenced", err)
	}
	// b's term writes; a key changed since read is a conflict, not a fence.
	rw2, err := b.write(ctx, tb, "wc", []byte(`{"topology":"wc","spec":4}`), rw)
	if err != nil {
		t.Fatalf("b's write: %v", err)
	}
	if _, err := b.write(ctx, tb, "wc", []byte(`{"topology":"wc","spec":5}`), rw); !errors.Is(err, ErrConflict) {
		t.Fatalf("b's write on an old revision: %v, want ErrConflict", err)
	}
	// a cannot start a term again on its old lease revision, nor write with any
	// revision.
	if _, err := a.fence(ctx, la, ra); !errors.Is(err, ErrFenced) {
		t.Errorf("a's fence again: %v, want ErrFenced", err)
	}
	if _, err := a.write(ctx, ta, "wc", []byte(`{"topology":"wc","spec":6}`), rw2); !errors.Is(err, ErrFenced) {
		t.Errorf("a's write on the current revision: %v, want ErrFenced", err)
	}
	rec, err := a.Record(ctx, "wc")
	if err != nil || rec.Spec != 4 || rec.Revision != rw2 {
		t.Errorf("wc is %+v (%v), want b's write (spec 4, revision %d)", rec, err, rw2)
	}
	// What the fence adds: the key's compare-and-set alone lets a's write of x in
	// (and, writing outside the fence, it moves the bucket: b's term must end).
	if _, err := a.assignments.Update(ctx, "x", []byte(`{"topology":"x","spec":3}`), rx); err != nil {
		t.Fatalf("plain compare-and-set on x: %v (expected to succeed, showing why the fence is needed)", err)
	}
}
