package multilang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ShellBolt returns a factory of bolts that each run command (its arguments
// included) in dir and speak Storm's multilang protocol with it. Declare the
// component's output streams on the topology as for any bolt.
func ShellBolt(command []string, dir string, opts ...Option) func() topology.Bolt {
	return func() topology.Bolt { return &shellBolt{o: newOptions(command, dir, opts)} }
}

// HeartbeatStream is the stream of the heartbeat tuples a bolt's subprocess is sent
// (task -1, no values); it answers each with {"command": "sync"}.
const HeartbeatStream = "__heartbeat"

type shellBolt struct {
	o   *options
	ctx context.Context
	tc  topology.TaskContext
	out topology.OutputCollector
	te  topology.TaskEmitter // nil if the collector cannot tell the tasks

	in     chan *tuple.Tuple // Execute hands inputs to the writer of the current run
	stopCh chan struct{}     // closed by Cleanup: stop the subprocess, no restart
	done   chan struct{}     // closed when the supervisor has ended

	mu   sync.Mutex
	held map[string]*tuple.Tuple // inputs written to the subprocess, not yet acked or failed
	next uint64

	last atomic.Int64 // unix nanos of the subprocess's last message
	// emitting is set while an emit of the subprocess is inside the collector, which
	// may wait for downstream room for long: the program is not silent then, gale is.
	emitting atomic.Bool
	restarts atomic.Int64
	// stopping is set by the stop's first Drain: from then on a program that ends
	// is the stop's business, not its inputs' (see supervise). The engine's
	// TaskContext.Stopping tells it sooner: a task stuck in Execute during the stop
	// (a program that does not read) gets no Drain.
	stopping atomic.Bool
}

func (b *shellBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if tc.Logger == nil {
		tc.Logger = slog.Default()
	}
	b.ctx, b.tc, b.out = ctx, tc, out
	b.te, _ = out.(topology.TaskEmitter)
	b.in = make(chan *tuple.Tuple)
	b.stopCh = make(chan struct{})
	b.done = make(chan struct{})
	b.held = map[string]*tuple.Tuple{}
	p, err := start(b.o, tc, b.o.setup(tc))
	if err != nil {
		// A program that cannot even start is a configuration error; one that
		// misbehaves at its handshake is retried by the supervisor.
		if errors.Is(err, errCannotRun) {
			return b.errorf("%w", err)
		}
		b.report(b.errorf("%w; restarting", err))
		p = nil
	}
	go b.supervise(p)
	return nil
}

// Execute hands the input to the subprocess, waiting while it does not read (the
// pipe is bounded: a slow subprocess back-pressures this task's inputs).
func (b *shellBolt) Execute(t *tuple.Tuple) {
	select {
	case b.in <- t:
	case <-b.ctx.Done(): // a hard stop: the tree is abandoned, not failed
	}
}

// Cleanup stops the subprocess (stdin closed, then SIGTERM, then SIGKILL) after the
// drain; a stop fails nothing.
func (b *shellBolt) Cleanup() error {
	close(b.stopCh)
	<-b.done
	return nil
}

// Drain implements topology.Drainer: the engine calls it once a stop has begun (and
// whenever this task's queue runs empty during it). The program has nothing to
// flush; what the call tells is that the stop is on.
func (b *shellBolt) Drain() { b.stopping.Store(true) }

// isStopping says whether a stop has begun: the engine said so, or Drain was called.
func (b *shellBolt) isStopping() bool {
	if b.stopping.Load() {
		return true
	}
	select {
	case <-b.tc.Stopping: // (nil outside the engine: never ready)
		return true
	default:
		return false
	}
}

// Restarts is how many times the subprocess was restarted; reach it with
// bolt.(interface{ Restarts() int64 }).
func (b *shellBolt) Restarts() int64 { return b.restarts.Load() }

// Held is the number of inputs written to the program and not yet acked or failed;
// reach it with bolt.(interface{ Held() int }).
func (b *shellBolt) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// supervise runs the subprocess, restarting it whenever it exits, times out or
// breaks the protocol, until Cleanup.
func (b *shellBolt) supervise(p *proc) {
	defer close(b.done)
	backoff := 10 * time.Millisecond
	stopBackoff := 10 * time.Millisecond
	for {
		if p == nil {
			var err error
			if p, err = start(b.o, b.tc, b.o.setup(b.tc)); err != nil {
				b.report(b.errorf("%w; restarting", err))
				p = nil
				// Meanwhile inputs fail at once (each charged one attempt) rather
				// than wait for a program that may never start.
				wait := time.NewTimer(backoff)
			waiting:
				for {
					select {
					case <-b.stopCh:
						wait.Stop()
						return
					case <-b.ctx.Done():
						wait.Stop()
						return
					case t := <-b.in:
						if b.isStopping() {
							b.hold(t) // the next program gets it: a stop charges nothing
							continue
						}
						_ = b.out.FailWith(t, fmt.Errorf("multilang: subprocess not running: %w", err))
					case <-wait.C:
						break waiting
					}
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
		}
		backoff = 10 * time.Millisecond
		if b.o.onStart != nil {
			b.o.onStart(b.tc, p.pid)
		}
		reason := b.serve(p)
		if reason == nil {
			return // stopped
		}
		b.restarts.Add(1)
		if b.isStopping() {
			// An exit during the stop's drain is not charged to the inputs: the next
			// program is sent them again (serve's writer starts with what is held).
			// If they cannot finish, the stop's deadline abandons their trees.
			// A pause between such restarts keeps an input that kills every program
			// from spawning one after another until the deadline.
			b.report(b.errorf("%w; subprocess pid %d ended during the stop: restarted, its %d held input(s) sent again (a stop charges nothing)", reason, p.pid, b.Held()))
			if !b.pause(stopBackoff) {
				return
			}
			stopBackoff = min(2*stopBackoff, time.Second)
		} else {
			b.report(b.errorf("%w; subprocess pid %d killed and restarted, %d held input(s) failed", reason, p.pid, b.failHeld(reason)))
		}
		p = nil
	}
}

// pause waits d, holding the inputs that come meanwhile for the next program; false
// if Cleanup or a hard stop came first.
func (b *shellBolt) pause(d time.Duration) bool {
	wait := time.NewTimer(d)
	defer wait.Stop()
	for {
		select {
		case <-b.stopCh:
			return false
		case <-b.ctx.Done():
			return false
		case t := <-b.in:
			b.hold(t)
		case <-wait.C:
			return true
		}
	}
}

// run is the state of one run of the subprocess shared by its goroutines.
type run struct {
	p    *proc
	mu   sync.Mutex
	ids  [][]byte // task-id lists to send, in the order of the emits
	sig  chan struct{}
	quit chan struct{}
}

// maxQueuedIDs bounds the task-id lists waiting for a program that emits without
// reading its stdin (Storm's clients read the list after each emit).
const maxQueuedIDs = 1 << 16

func (r *run) queueIDs(js []byte) error {
	r.mu.Lock()
	if len(r.ids) >= maxQueuedIDs {
		r.mu.Unlock()
		return fmt.Errorf("%d task-id lists not read: the program emits without reading its stdin", len(r.ids))
	}
	r.ids = append(r.ids, js)
	r.mu.Unlock()
	select {
	case r.sig <- struct{}{}:
	default:
	}
	return nil
}

// serve runs one subprocess until it ends, times out or breaks the protocol (the
// reason, after the process was killed) or until Cleanup (nil, after the process was
// stopped gently).
func (b *shellBolt) serve(p *proc) error {
	r := &run{p: p, sig: make(chan struct{}, 1), quit: make(chan struct{})}
	b.last.Store(time.Now().UnixNano())
	wdone := make(chan error, 1)
	hdone := make(chan error, 1)
	go func() { wdone <- b.write(r) }()
	go func() { hdone <- b.handle(r) }()
	tick := time.NewTicker(b.o.heartbeat)
	defer tick.Stop()
	var reason error
	for reason == nil {
		select {
		case err := <-hdone:
			reason = err
			hdone <- err
		case err := <-wdone:
			wdone <- err
			// A broken pipe is most often the program's exit: say how it ended,
			// if its stdout ends soon.
			select {
			case herr := <-hdone:
				reason = herr
				hdone <- herr
			case <-time.After(time.Second):
			}
			if reason == nil {
				reason = fmt.Errorf("writing to the subprocess: %w", err)
			}
		case <-tick.C:
			if idle := time.Since(time.Unix(0, b.last.Load())); idle > b.o.timeout && !b.emitting.Load() {
				reason = fmt.Errorf("no heartbeat answer or message for %v (timeout %v)", idle.Round(time.Millisecond), b.o.timeout)
			}
		case <-b.stopCh:
			close(r.quit)
			p.stop(b.o.grace)
			<-wdone
			<-hdone
			return nil
		case <-b.ctx.Done():
			close(r.quit)
			p.kill()
			<-wdone
			<-hdone
			return nil
		}
	}
	close(r.quit)
	p.kill()
	<-wdone
	<-hdone
	return reason
}

// write sends the inputs, the task-id lists and the heartbeats to the subprocess.
func (b *shellBolt) write(r *run) error {
	hb := time.NewTicker(b.o.heartbeat)
	defer hb.Stop()
	// What is held here was held by a program that ended during a stop: this one
	// gets it again, in the order it came, under the same ids.
	for _, js := range b.heldAgain() {
		if err := r.p.send(js); err != nil {
			return err
		}
	}
	for {
		r.mu.Lock()
		ids := r.ids
		r.ids = nil
		r.mu.Unlock()
		for _, js := range ids {
			if err := r.p.send(js); err != nil {
				return err
			}
		}
		select {
		case <-r.sig:
		case t := <-b.in:
			if err := r.p.send(b.hold(t)); err != nil {
				return err
			}
		case <-hb.C:
			js, _ := json.Marshal(map[string]any{"id": "-1", "comp": "__system", "stream": HeartbeatStream, "task": -1, "tuple": []any{}})
			if err := r.p.send(js); err != nil {
				return err
			}
		case <-r.quit:
			return nil
		}
	}
}

// hold gives the input an id, keeps it until the subprocess acks or fails it, and
// returns its message.
func (b *shellBolt) hold(t *tuple.Tuple) []byte {
	b.mu.Lock()
	b.next++
	id := strconv.FormatUint(b.next, 10)
	b.held[id] = t
	b.mu.Unlock()
	return message(id, t)
}

// heldAgain is the messages of the inputs held, by their ids in order.
func (b *shellBolt) heldAgain() [][]byte {
	b.mu.Lock()
	ids := make([]uint64, 0, len(b.held))
	for id := range b.held {
		n, _ := strconv.ParseUint(id, 10, 64)
		ids = append(ids, n)
	}
	slices.Sort(ids)
	held := make([]*tuple.Tuple, len(ids))
	for i, n := range ids {
		held[i] = b.held[strconv.FormatUint(n, 10)]
	}
	b.mu.Unlock()
	msgs := make([][]byte, len(ids))
	for i, t := range held {
		msgs[i] = message(strconv.FormatUint(ids[i], 10), t)
	}
	return msgs
}

// message is the JSON of an input sent to the program under id.
func message(id string, t *tuple.Tuple) []byte {
	task := t.SourceTask()
	if t.IsTick() {
		task = -1
	}
	m := map[string]any{"id": id, "comp": t.SourceComponent(), "stream": t.SourceStream(), "task": task, "tuple": []any(t.Values())}
	js, err := json.Marshal(m)
	if err != nil {
		// A value JSON cannot carry (a channel, a func): send its printed form.
		vs := make([]any, t.Len())
		for i, v := range t.Values() {
			vs[i] = fmt.Sprint(v)
		}
		m["tuple"] = vs
		js, _ = json.Marshal(m)
	}
	return js
}

// take removes a held input by the id the subprocess gave.
func (b *shellBolt) take(id string) *tuple.Tuple {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.held[id]
	delete(b.held, id)
	return t
}

// failHeld fails every input the dead subprocess held, and says how many.
func (b *shellBolt) failHeld(reason error) int {
	b.mu.Lock()
	held := b.held
	b.held = map[string]*tuple.Tuple{}
	b.mu.Unlock()
	for _, t := range held {
		_ = b.out.FailWith(t, fmt.Errorf("multilang: subprocess restarted: %w", reason))
	}
	return len(held)
}

// handle processes what the subprocess sends, until its stdout ends (an error: a
// bolt's subprocess exits only when told to) or a message breaks the protocol.
func (b *shellBolt) handle(r *run) error {
	for text := range r.p.msgs {
		b.last.Store(time.Now().UnixNano())
		c, err := parse(text)
		if err != nil {
			return err
		}
		switch c.Command {
		case "emit":
			b.emitting.Store(true)
			err := b.emit(r, c, text)
			b.last.Store(time.Now().UnixNano())
			b.emitting.Store(false)
			if err != nil {
				return err
			}
		case "ack", "fail":
			id, err := idText(c.ID)
			if err != nil {
				return badMessage(c.Command+" with a bad id", text)
			}
			t := b.take(id)
			if t == nil {
				b.report(b.errorf("subprocess %ss id %s, which it does not hold (ignored): %q", c.Command, id, text))
				continue
			}
			if c.Command == "ack" {
				_ = b.out.Ack(t)
			} else {
				_ = b.out.FailWith(t, errors.New("failed by the subprocess"))
			}
		case "sync": // a heartbeat's answer: b.last says it came
		default:
			if !common(b.tc, b.out.ReportError, c) {
				return badMessage(fmt.Sprintf("unknown command %q", c.Command), text)
			}
		}
	}
	select {
	case <-r.quit:
		return nil
	default:
	}
	return fmt.Errorf("subprocess ended (%s)", r.p.why())
}

// emit does a subprocess's emit: anchored to the held inputs it names, on its
// stream, answered with the target tasks unless direct or need_task_ids is false.
func (b *shellBolt) emit(r *run, c *command, text []byte) error {
	vs, err := values(c.Tuple)
	if err != nil {
		return badMessage(err.Error(), text)
	}
	stream := c.Stream
	if stream == "" {
		stream = tuple.DefaultStream
	}
	var anchors []*tuple.Tuple
	if len(c.Anchors) > 0 {
		b.mu.Lock()
		for _, a := range c.Anchors {
			t := b.held[a]
			if t == nil {
				b.mu.Unlock()
				return badMessage(fmt.Sprintf("emit anchored to id %q, which the subprocess does not hold (acked, failed or never sent)", a), text)
			}
			anchors = append(anchors, t)
		}
		b.mu.Unlock()
	}
	if c.Task != nil {
		err = b.out.EmitDirect(*c.Task, stream, vs, anchors...)
	} else if b.te != nil {
		var tasks []int
		tasks, err = b.te.EmitTasks(stream, vs, anchors...)
		if err == nil && (c.NeedTaskIDs == nil || *c.NeedTaskIDs) {
			js, _ := json.Marshal(tasks)
			if err := r.queueIDs(js); err != nil {
				return badMessage(err.Error(), text)
			}
		}
	} else {
		err = b.out.EmitTo(stream, vs, anchors...)
		if err == nil && (c.NeedTaskIDs == nil || *c.NeedTaskIDs) {
			if err := r.queueIDs([]byte("[]")); err != nil {
				return badMessage(err.Error(), text)
			}
		}
	}
	return emitError(err, text)
}

// emitError turns a refused emit into a protocol error; misuse is only reported
// (the engine has counted and logged it).
func emitError(err error, text []byte) error {
	switch {
	case err == nil, errors.Is(err, topology.ErrMisuse), errors.Is(err, topology.ErrStopped):
		return nil
	}
	return badMessage("emit refused ("+err.Error()+")", text)
}

func (b *shellBolt) errorf(format string, a ...any) error {
	return fmt.Errorf("multilang: component %q task %d: "+format, append([]any{b.tc.Component, b.tc.TaskID}, a...)...)
}

func (b *shellBolt) report(err error) {
	if b.out != nil {
		b.out.ReportError(err)
	}
}
