package jslog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/eventlog"
)

// Status documents of several writers. Only the holder of the log spout's lease
// processes events, but a process that held it before writes too: the outcome
// of a tree that was still running when it lost the lease, or a flush that was
// late (its connection down, the process paused) and lands after the new holder
// finished the same event. A plain Put would then replace the new holder's
// PROCESSED with an older PERSISTED, and the event would show unfinished for
// ever: the new holder's offset is past it, nobody processes it again.
//
// So a status document the guard calls guarded (the ingest service's: every
// status but a final one) is written on a look at the stored one: not at all if
// the guard says it must not replace it, else by an Update on the revision read
// (a Create if there is none), looked at again if another write landed in
// between. The other documents, the final statuses that are nearly all of them,
// are written as before, without a look.

// statusGuard is GuardStatus's pair of functions.
type statusGuard struct {
	guarded  func(doc []byte) bool
	replaces func(stored, doc []byte) bool
}

type guardedDoc struct {
	id  string
	doc []byte
}

// GuardStatus makes Apply write a status document for which guarded is true
// only if replaces(stored, doc) allows it over the stored one (see above). The
// ingest service sets it.
func (l *Log) GuardStatus(guarded func(doc []byte) bool, replaces func(stored, doc []byte) bool) {
	l.guard.Store(&statusGuard{guarded: guarded, replaces: replaces})
}

// guardTries bounds the looks at a document that other writers keep changing.
const guardTries = 4

// guardWorkers bounds the documents written on a look at once: a takeover
// writes one per record pending (the log spout's startRecovered), and one after
// the other they would double the time it takes.
const guardWorkers = 16

// putGuarded writes docs, each on a look at the stored one.
func (l *Log) putGuarded(g *statusGuard, docs []guardedDoc) error {
	if len(docs) == 0 {
		return nil
	}
	ctx, cancel := l.op(context.Background())
	defer cancel()
	work := make(chan guardedDoc)
	errs := make(chan error, len(docs))
	var wg sync.WaitGroup
	for range min(len(docs), guardWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				errs <- l.putGuardedOne(ctx, g, d)
			}
		}()
	}
	for _, d := range docs {
		work <- d
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) putGuardedOne(ctx context.Context, g *statusGuard, d guardedDoc) error {
	key := docKey(eventlog.Status, d.id)
	for try := 1; ; try++ {
		e, err := l.docs.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			_, err = l.docs.Create(ctx, key, d.doc)
		case err != nil:
		case !g.replaces(e.Value(), d.doc):
			l.cfg.Logger.Debug("jslog: status document not written: the stored one is further along", "event_id", d.id)
		default:
			_, err = l.docs.Update(ctx, key, d.doc, e.Revision())
		}
		if err == nil {
			return nil
		}
		if (!isWrongLastSeq(err) && !errors.Is(err, jetstream.ErrKeyExists)) || try == guardTries {
			return fmt.Errorf("%w: document %s: %w", ErrNotStored, key, err)
		}
	}
}
