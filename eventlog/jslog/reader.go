package jslog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The log spout's reader. The spout calls Read every millisecond or so while
// idle, so Read must neither wait nor cost the server anything: it takes what
// one long-lived consumer has read ahead into a buffer. That consumer, on the
// server, is made once per position and lives until Close, a move of the
// position, or an error (it vanished, the connection went, messages were lost
// on their way): then it is deleted and a new one made where the last one
// stopped. Each FetchNoWait of an ordered consumer used to delete the server's
// consumer and make a new one: hundreds of API requests a second when idle, and
// one orphan per error.

const (
	// readAhead bounds the records asked of the server and not yet taken, and
	// readAheadBytes their bytes (raised to twice the connection's largest
	// message, which must always fit in one pull): by count alone, 256 records
	// of 1 MiB were held after one Read. handOff is the few more that wait
	// between the consumer and Read.
	readAhead      = 256
	readAheadBytes = 8 << 20
	handOff        = 16
	// readerHeartbeat is how often the server tells an idle reader it is there:
	// two missed, and the reader makes its consumer again. A consumer stalled by a
	// leader change is noticed by them: at 5 s the spout stood still 10 s after a
	// kill of every node (TestServeJetStreamThreeNodesKilled). A heartbeat is a
	// message, not an API request.
	readerHeartbeat = time.Second
	// readerInactive is how long the server keeps a reader's consumer nobody
	// asks anything of: one left behind (a process killed, a delete lost in an
	// outage) goes after it; a reader that stalled longer (its buffer full while
	// the spout does not read) notices by the missed heartbeats and makes a new one.
	readerInactive = time.Minute
	// readerRetryMax caps the wait between attempts to make a consumer.
	readerRetryMax = 5 * time.Second
)

// reader reads the stream from a seq on into msgs, with one consumer at a time
// on the server; its goroutine (feed) is the consumer's owner: it deletes each
// consumer it made before making the next one, and before it exits.
type reader struct {
	l      *Log
	from   uint64
	msgs   chan jetstream.Msg // read ahead, in stream order
	ctx    context.Context    // done: stop
	cancel context.CancelFunc
	done   chan struct{} // closed when feed has exited, its consumer deleted
	wake   chan struct{} // a message or a failure came (tests wait on it)

	mu  sync.Mutex
	err error // why no consumer reads now (nil while one does)

	// head is a message Read took from msgs but could not hand on (a record
	// that does not decode): the next Read at its seq meets it again.
	head jetstream.Msg
}

// newReader starts a reader at seq from. Its consumer is made once prev (the
// reader it replaces, or nil) has deleted its own.
func (l *Log) newReader(from uint64, prev *reader) *reader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{l: l, from: from, msgs: make(chan jetstream.Msg, handOff), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	var after <-chan struct{}
	if prev != nil {
		after = prev.done
	}
	l.readers.Add(1)
	go r.feed(after)
	return r
}

// stop makes the reader's goroutine delete its consumer and exit, without waiting
// for it (Log.Close waits for every reader).
func (r *reader) stop() { r.cancel() }

func (r *reader) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *reader) setFailure(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	r.signal()
}

func (r *reader) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// feed makes a consumer at the next seq to read and reads it until an error, then
// deletes it and makes another, until stopped.
func (r *reader) feed(after <-chan struct{}) {
	defer r.l.readers.Done()
	defer close(r.done)
	if after != nil {
		// Stopped already: it deletes its consumer and exits. Waited for even if
		// this one is stopped meanwhile, so done means all before it are gone.
		<-after
	}
	if r.ctx.Err() != nil {
		return
	}
	next, wait := r.from, time.Duration(0)
	for {
		start := time.Now()
		made, err := r.consume(&next)
		if r.ctx.Err() != nil {
			return
		}
		if made {
			lvl := slog.LevelWarn
			if errors.Is(err, errReconnected) {
				lvl = slog.LevelInfo
			}
			r.l.cfg.Logger.Log(context.Background(), lvl, "jslog: the log reader's consumer failed; making a new one", "seq", next, "err", err)
			if time.Since(start) >= readerRetryMax {
				wait = 0 // it worked for a while: make the next one at once
				continue
			}
		} else {
			r.setFailure(fmt.Errorf("jslog: reader at seq %d: %w", next, err)) // Read says so
		}
		// Not made, or failing as soon as made: wait longer each time.
		wait = min(max(2*wait, 250*time.Millisecond), readerRetryMax)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return
		}
	}
}

// consume makes one consumer at *next and hands its messages on, moving *next
// past each, until an error or stop; it deletes the consumer before it returns.
// made says whether the consumer was made and read.
func (r *reader) consume(next *uint64) (made bool, err error) {
	l := r.l
	// Named here, so that it can be deleted even if the answer to its creation
	// was lost.
	name := l.cfg.Prefix + "-reader-" + rand.Text()
	// The creation is not cut short by a stop: the server may take a create
	// after a delete sent later, and the consumer would be left behind. A stop
	// waits for its answer (at most Timeout), then deletes it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), l.cfg.Timeout)
	c, err := l.js.CreateConsumer(ctx, l.name, jetstream.ConsumerConfig{
		Name: name, Description: "gale's log reader (" + l.cfg.Holder + ")",
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(*next, 1),
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1,
		InactiveThreshold: readerInactive,
	})
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrTimeout) {
			l.deleteConsumer(name, false) // made, maybe, its answer lost
		}
		return false, err
	}
	defer l.deleteConsumer(name, true)
	if err := r.ctx.Err(); err != nil {
		return false, err
	}
	limit := max(readAheadBytes, 2*int(l.js.Conn().MaxPayload()))
	it, err := c.Messages(jetstream.PullMaxMessagesWithBytesLimit(readAhead, limit), jetstream.PullHeartbeat(readerHeartbeat),
		jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return false, err
	}
	defer it.Stop()
	// After a reconnect the consumer may be gone (a restarted node's memory), and
	// its pulls would go unanswered until two heartbeats are missed: make a new
	// one at once, as an ordered consumer does.
	nc := l.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	cctx, ccancel := context.WithCancelCause(r.ctx)
	defer ccancel(nil)
	go func() {
		select {
		case _, ok := <-reconnected:
			if ok {
				ccancel(errReconnected)
			}
		case <-cctx.Done():
		}
	}()
	r.setFailure(nil)
	var dseq uint64 // the consumer's seq of the last message: they come one after another
	for {
		m, err := it.Next(jetstream.NextContext(cctx))
		if err != nil {
			if cause := context.Cause(cctx); cause != nil && r.ctx.Err() == nil {
				err = cause
			}
			return true, err
		}
		md, err := m.Metadata()
		if err != nil {
			return true, err
		}
		if md.Sequence.Consumer != dseq+1 {
			return true, fmt.Errorf("messages lost on their way: consumer seq %d after %d", md.Sequence.Consumer, dseq)
		}
		dseq = md.Sequence.Consumer
		select {
		case r.msgs <- m:
			*next = md.Sequence.Stream + 1
			r.signal()
		case <-cctx.Done():
			return true, context.Cause(cctx)
		}
	}
}

var errReconnected = errors.New("reconnected")

// deleteConsumer deletes the stream's consumer name, if it is there (made says
// whether it is known to have been made: its failed delete is worth a warning).
func (l *Log) deleteConsumer(name string, made bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	err := l.js.DeleteConsumer(ctx, l.name, name)
	if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return
	}
	lvl := slog.LevelDebug
	if made {
		lvl = slog.LevelWarn
	}
	l.cfg.Logger.Log(ctx, lvl, "jslog: deleting a consumer of the log failed; the server removes it once unused for "+readerInactive.String(),
		"consumer", name, "err", err)
}

// take returns the next message read ahead, if any, without waiting.
func (r *reader) take() jetstream.Msg {
	if m := r.head; m != nil {
		r.head = nil
		return m
	}
	select {
	case m := <-r.msgs:
		return m
	default:
		return nil
	}
}

// readWake is signaled when the current reader has a message or a failure, and
// closed if there is none, so that the next Read says why (tests).
func (l *Log) readWake() <-chan struct{} {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.rd == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return l.rd.wake
}
