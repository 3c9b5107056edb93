package jslog

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/eventlog"
)

// OnStatusChange calls fn with the event id of every status document stored from
// now on, by any serve process sharing the log, until Close: a serve process that
// does not hold the log spout's lease learns this way that an event it answers for
// (ack=processed) was processed by the one that does. fn runs on the watch's
// goroutine and must not block. A watch lost to an outage is made again; what was
// stored in between is not told (readers wait with a deadline and look again).
// One call per Log.
func (l *Log) OnStatusChange(fn func(id string)) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.watchStop != nil || l.closed.Load() {
		return
	}
	l.watchStop, l.watchDone = make(chan struct{}), make(chan struct{})
	go l.watchStatus(fn)
}

func (l *Log) watchStatus(fn func(id string)) {
	defer close(l.watchDone)
	prefix := string(rune(eventlog.Status)) + "."
	for {
		ctx, cancel := context.WithCancel(context.Background())
		// Making the watch is bounded by the timeout: a request lost with a node
		// would otherwise wait for ever, the context living as long as the watch.
		late := time.AfterFunc(l.cfg.Timeout, cancel)
		w, err := l.docs.Watch(ctx, prefix+">", jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
		if !late.Stop() && err == nil {
			_ = w.Stop()
			for range w.Updates() {
			}
			err = context.DeadlineExceeded
		}
		if err == nil {
			l.drainWatch(w, prefix, fn)
			cancel()
			_ = w.Stop()
			for range w.Updates() { // nats.go's callback may block on a full channel
			}
		} else {
			cancel()
			l.cfg.Logger.Debug("jslog: watch of status documents failed; trying again", "err", err)
		}
		select {
		case <-l.watchStop:
			return
		case <-time.After(time.Second):
		}
	}
}

// drainWatch delivers w's updates until it closes or the log closes.
func (l *Log) drainWatch(w jetstream.KeyWatcher, prefix string, fn func(id string)) {
	for {
		select {
		case <-l.watchStop:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the end of the initial values (none, UpdatesOnly)
			}
			enc, found := strings.CutPrefix(e.Key(), prefix)
			if !found {
				continue
			}
			id, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				continue
			}
			fn(string(id))
		}
	}
}

// closeWatch stops the watch, if any, and waits for it.
func (l *Log) closeWatch() {
	l.wmu.Lock()
	stop, done := l.watchStop, l.watchDone
	l.wmu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
