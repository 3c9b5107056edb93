package multilang

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ShellSpout returns a factory of spouts that each run command (its arguments
// included) in dir and speak Storm's multilang protocol with it. The message ids the
// program gives its emits reach Ack and Fail as a SpoutID and go back to the program
// exactly as it wrote them (a string stays a string, a number a number).
//
// The protocol is synchronous: NextTuple, Ack and Fail each send a command and take
// the program's emits until its sync, so each may take as long as the program does
// (at most the timeout, after which the program is killed and restarted). A program
// with nothing to emit should sleep briefly before its sync.
func ShellSpout(command []string, dir string, opts ...Option) func() topology.Spout {
	return func() topology.Spout { return &shellSpout{o: newOptions(command, dir, opts)} }
}

// SpoutID is a shell spout's message id: the JSON text of the id the program gave.
type SpoutID string

type shellSpout struct {
	o   *options
	ctx context.Context
	tc  topology.TaskContext
	out topology.SpoutCollector
	te  topology.SpoutTaskEmitter

	p        *proc
	active   bool      // Activate called, Deactivate not yet: a new program is activated too
	retryAt  time.Time // when to try starting again after a failed start
	backoff  time.Duration
	restarts atomic.Int64
}

func (s *shellSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Logger == nil {
		tc.Logger = slog.Default()
	}
	s.ctx, s.tc, s.out = ctx, tc, out
	s.te, _ = out.(topology.SpoutTaskEmitter)
	if err := s.ensure(); errors.Is(err, errCannotRun) {
		return err
	}
	return nil
}

// ensure starts the subprocess if none runs (not before retryAt after a failure).
func (s *shellSpout) ensure() error {
	if s.p != nil {
		return nil
	}
	if time.Now().Before(s.retryAt) {
		return errors.New("waiting to restart")
	}
	p, err := start(s.o, s.tc, s.o.setup(s.tc))
	if err != nil {
		err = s.errorf("%w; restarting", err)
		s.out.ReportError(err)
		s.backoff = min(max(2*s.backoff, 10*time.Millisecond), time.Second)
		s.retryAt = time.Now().Add(s.backoff)
		return err
	}
	s.backoff = 0
	s.p = p
	if s.o.onStart != nil {
		s.o.onStart(s.tc, p.pid)
	}
	return nil
}

func (s *shellSpout) NextTuple() { s.call(map[string]any{"command": "next"}) }

// Activate implements topology.ActivatingSpout: Storm's activate command.
func (s *shellSpout) Activate() {
	s.active = true
	s.call(map[string]any{"command": "activate"})
}

// Deactivate implements topology.ActivatingSpout: Storm's deactivate command, sent
// only to a running program (one started since has never been activated).
func (s *shellSpout) Deactivate() {
	s.active = false
	if s.p != nil {
		s.call(map[string]any{"command": "deactivate"})
	}
}

func (s *shellSpout) Ack(msgID any) { s.outcome("ack", msgID) }

func (s *shellSpout) Fail(msgID any) { s.outcome("fail", msgID) }

func (s *shellSpout) outcome(cmd string, msgID any) {
	id, ok := msgID.(SpoutID)
	if !ok {
		return
	}
	s.call(map[string]any{"command": cmd, "id": json.RawMessage(id)})
}

func (s *shellSpout) Close() error {
	if s.p != nil {
		s.p.stop(s.o.grace)
		s.p = nil
	}
	return nil
}

// Restarts is how many times the subprocess was restarted; reach it with
// spout.(interface{ Restarts() int64 }).
func (s *shellSpout) Restarts() int64 { return s.restarts.Load() }

// call sends one command and takes the program's messages until its sync. A
// program that ends, breaks the protocol or does not sync within the timeout is
// killed, and started again at a later call.
func (s *shellSpout) call(m map[string]any) {
	fresh := s.p == nil
	if s.ensure() != nil {
		return
	}
	// A program started again while the topology is active is activated first, as
	// Storm activates a spout after its open.
	if fresh && s.active && m["command"] != "activate" && !s.exchange(map[string]any{"command": "activate"}) {
		return
	}
	s.exchange(m)
}

// exchange sends one command and takes the program's messages until its sync; on
// an error the program is killed and false returned.
func (s *shellSpout) exchange(m map[string]any) bool {
	js, _ := json.Marshal(m)
	err := s.p.send(js)
	if err == nil {
		err = s.untilSync()
	}
	if err != nil {
		s.p.kill()
		s.p = nil
		s.restarts.Add(1)
		s.out.ReportError(s.errorf("%w; subprocess killed and restarted", err))
		return false
	}
	return true
}

func (s *shellSpout) untilSync() error {
	timer := time.NewTimer(s.o.timeout)
	defer timer.Stop()
	for {
		var text []byte
		var ok bool
		select {
		case text, ok = <-s.p.msgs:
		case <-timer.C:
			return fmt.Errorf("no sync within %v", s.o.timeout)
		case <-s.ctx.Done():
			return nil // a hard stop: Close kills the program
		}
		if !ok {
			return fmt.Errorf("subprocess ended (%s)", s.p.why())
		}
		c, err := parse(text)
		if err != nil {
			return err
		}
		switch c.Command {
		case "sync":
			return nil
		case "emit":
			if err := s.emit(c, text); err != nil {
				return err
			}
			// The emit may have waited for downstream room: the timeout measures
			// the program's silence, not gale's.
			timer.Reset(s.o.timeout) // (Go 1.23+: no stale expiry survives a Reset)
		default:
			if !common(s.tc, s.out.ReportError, c) {
				return badMessage(fmt.Sprintf("unknown command %q", c.Command), text)
			}
		}
	}
}

func (s *shellSpout) emit(c *command, text []byte) error {
	vs, err := values(c.Tuple)
	if err != nil {
		return badMessage(err.Error(), text)
	}
	stream := c.Stream
	if stream == "" {
		stream = tuple.DefaultStream
	}
	var msgID any
	if len(c.ID) > 0 && string(c.ID) != "null" {
		msgID = SpoutID(compact(c.ID))
	}
	if c.Task != nil {
		return emitError(s.out.EmitDirect(*c.Task, stream, vs, msgID), text)
	}
	var tasks []int
	if s.te != nil {
		tasks, err = s.te.EmitTasks(stream, vs, msgID)
	} else {
		err = s.out.EmitTo(stream, vs, msgID)
	}
	if err != nil {
		return emitError(err, text)
	}
	if c.NeedTaskIDs == nil || *c.NeedTaskIDs {
		js, _ := json.Marshal(tasks)
		if tasks == nil {
			js = []byte("[]")
		}
		if err := s.p.send(js); err != nil {
			return err
		}
	}
	return nil
}

// compact is the id's JSON text without insignificant spaces (json.Compact keeps
// numbers and string escapes as written), so that one id always has one key.
func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func (s *shellSpout) errorf(format string, a ...any) error {
	return fmt.Errorf("multilang: component %q task %d: "+format, append([]any{s.tc.Component, s.tc.TaskID}, a...)...)
}
