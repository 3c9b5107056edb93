package multilang

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gale-stream/gale/topology"
)

// proc is one run of the subprocess: the pipes, and the goroutines that read its
// stdout (messages) and stderr (log lines). The owner writes to stdin.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	pidDir string
	stdin  io.WriteCloser
	w      *bufio.Writer
	wmu    sync.Mutex // guards w
	log    *slog.Logger
	// msgs carries what the subprocess sent, one message at a time; it is closed when
	// stdout ends or fails, and err then says why (nil at a clean end). Its small
	// capacity bounds what waits here to a few messages (each at most MaxMessage).
	msgs chan []byte
	err  error
	// quit stops the reader's sends (the owner no longer reads msgs).
	quit     chan struct{}
	quitOnce sync.Once
	exited   chan struct{} // closed once the process was waited for
	state    *os.ProcessState
}

// errNoHandshake: the program did not answer the handshake in time.
var errNoHandshake = errors.New("no handshake answer")

// errCannotRun: the command could not be started at all (not found, not
// executable, no such directory): a configuration error, not retried at Prepare.
var errCannotRun = errors.New("cannot run")

// start runs the command in its own process group (a Ctrl-C to gale does not reach
// it: gale stops it after the drain), with a parent-death signal, and does the
// handshake: the setup message out, {"pid": N} back within timeout.
func start(o *options, tc topology.TaskContext, setup map[string]any) (*proc, error) {
	if len(o.command) == 0 {
		return nil, errors.New("multilang: empty command")
	}
	pidDir, err := os.MkdirTemp("", "gale-multilang-pids-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.command[0], o.command[1:]...)
	cmd.Dir = o.dir
	if o.env != nil {
		cmd.Env = append(os.Environ(), o.env...)
	}
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(pidDir)
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(pidDir)
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(pidDir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(pidDir)
		return nil, fmt.Errorf("multilang: %w %q in %q: %w", errCannotRun, o.command, o.dir, err)
	}
	p := &proc{
		cmd: cmd, pid: cmd.Process.Pid, pidDir: pidDir, stdin: stdin,
		w:    bufio.NewWriterSize(stdin, 64<<10),
		log:  tc.Logger.With("pid", cmd.Process.Pid),
		msgs: make(chan []byte, 8), quit: make(chan struct{}), exited: make(chan struct{}),
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.readStdout(stdout) }()
	go func() { defer readers.Done(); p.readStderr(stderr) }()
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	exited := exitedNoReap(p.pid)
	go func() {
		// Wait closes the pipes: call it once every read is done, so that nothing
		// the program wrote before its exit is lost; but a descendant that left
		// the process group may hold the pipes open for ever: then 1 s after the
		// exit is enough.
		select {
		case <-readersDone:
		case <-exited:
			select {
			case <-readersDone:
			case <-time.After(time.Second):
				p.log.Warn("the program exited but its stdout or stderr stays open (a descendant outside its process group?): closing them")
			}
		}
		_ = cmd.Wait()
		<-readersDone
		p.state = cmd.ProcessState
		close(p.exited)
	}()

	setup["pidDir"] = pidDir
	js, err := json.Marshal(setup)
	if err == nil {
		err = p.send(js)
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("multilang: handshake with %q: %w", o.command, err)
	}
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	select {
	case text, ok := <-p.msgs:
		if !ok {
			p.kill()
			return nil, fmt.Errorf("multilang: handshake with %q: the program ended (%v) before answering %s", o.command, p.why(), "{\"pid\": N}")
		}
		c, err := parse(text)
		if err == nil && c.PID == nil {
			err = badMessage(`handshake answer has no "pid"`, text)
		}
		if err != nil {
			p.kill()
			return nil, fmt.Errorf("multilang: handshake with %q: %w", o.command, err)
		}
		if *c.PID != p.pid {
			p.log.Debug("multilang: the program's pid differs from the started process's (a wrapper?)", "said", *c.PID)
		}
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("multilang: handshake with %q: %w within %v", o.command, errNoHandshake, o.timeout)
	}
	return p, nil
}

// why says how the reading ended: the read error, or the exit status.
func (p *proc) why() string {
	select {
	case <-p.exited:
		if p.err != nil {
			return p.err.Error() + ", " + p.state.String()
		}
		return p.state.String()
	case <-time.After(time.Second): // the process closed stdout but lives on
		if p.err != nil {
			return p.err.Error()
		}
		return "stdout closed"
	}
}

func (p *proc) readStdout(r io.Reader) {
	defer close(p.msgs)
	mr := newMsgReader(r)
	for {
		text, err := mr.next()
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) { // closed: by Wait, after the exit
				p.err = err
			}
			_, _ = io.Copy(io.Discard, r) // let the process finish writing and exit
			return
		}
		select {
		case p.msgs <- append([]byte(nil), text...):
		case <-p.quit:
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
}

// readStderr logs each line the program writes to stderr, with the component and
// task (the task's logger carries them) and the pid; a line is cut at 64 KiB.
func (p *proc) readStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			p.log.Info("subprocess stderr", "line", string(trimNL(line)))
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return
		}
	}
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// send writes one message (a JSON text) and flushes it. Safe for concurrent use; it
// blocks while the program does not read (the pipe is full): that is backpressure.
func (p *proc) send(js []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.w.Write(frame(js)); err != nil {
		return err
	}
	return p.w.Flush()
}

// kill ends the process group at once and waits for the process.
func (p *proc) kill() {
	p.quitOnce.Do(func() { close(p.quit) })
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.stdin.Close()
	<-p.exited
	os.RemoveAll(p.pidDir)
}

// stop ends the process gently: stdin closed (the program sees its input end), then
// SIGTERM to the group after grace, then SIGKILL after grace again.
func (p *proc) stop(grace time.Duration) {
	p.quitOnce.Do(func() { close(p.quit) })
	_ = p.stdin.Close() // may block no longer than the program's reads: stdin is closed
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		t.Reset(grace)
		select {
		case <-p.exited:
		case <-t.C:
		}
	}
	p.kill()
}

// PID is the process id of a run, for tests and tools.
func (p *proc) String() string { return strconv.Itoa(p.pid) }
