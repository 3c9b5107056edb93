package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/ui"
)

// newLogger makes the logger of a command from --log-level and --log-format.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var ll slog.Level
	if err := ll.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: ll}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// UIFlags are the flags of a long-running command that serves the UI and metrics.
type UIFlags struct {
	addr   string
	token  string
	sample float64
	Ln     net.Listener // opened by listen, before the job starts
}

func (f *UIFlags) Register(fl *pflag.FlagSet, what string) {
	fl.StringVar(&f.addr, "ui", "", "serve the web UI and Prometheus /metrics on this address while "+what+" runs (e.g. 127.0.0.1:8080; :8080 listens on every interface)")
	fl.StringVar(&f.token, "ui-token", "", "require this token on the UI and /metrics (Authorization: Bearer, or ?token=)")
	fl.Float64Var(&f.sample, "lineage-sample", lineage.DefaultConfig().Sample,
		"fraction of tuple trees whose whole lineage is recorded (failed and timed-out trees are always recorded)")
}

// lineage returns the recorder for --lineage-sample.
func (f *UIFlags) Lineage() (*lineage.Recorder, error) {
	c := lineage.DefaultConfig()
	c.Sample = f.sample
	r, err := lineage.New(c)
	if err != nil {
		return nil, fmt.Errorf("--lineage-sample %v: must be between 0 and 1", f.sample)
	}
	return r, nil
}

// listen opens the --ui listener (if any) before the job starts, so that a taken port
// fails at once instead of after the job.
func (f *UIFlags) Listen() error {
	if f.addr == "" {
		return nil
	}
	ln, err := ui.Listen(f.addr)
	if err != nil {
		return fmt.Errorf("--ui %s: %w", f.addr, err)
	}
	f.Ln = ln
	return nil
}

// start serves the UI of rt on the listener of listen (nil if --ui was not given) and
// says where.
func (f *UIFlags) Start(name string, rt *engine.Runtime, stderr io.Writer) (*ui.Server, error) {
	if f.Ln == nil {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterProcess(reg); err != nil {
		f.Ln.Close()
		return nil, err
	}
	u, err := ui.New(ui.Options{Name: name, Runtime: rt, Token: f.token, Registry: reg})
	if err != nil {
		f.Ln.Close()
		return nil, err
	}
	s := ui.Serve(u, f.Ln)
	fmt.Fprintf(stderr, "gale: web UI on %s (Prometheus metrics at %smetrics)\n", s.URL(), s.URL())
	return s, nil
}

// lockedWriter serialises writes to one stream shared by the logger, progress lines and
// messages from other goroutines.
// NewLockedWriter returns a writer that serialises the writes to w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// isTerminal reports whether w is a terminal (not merely a character device:
// /dev/null is one too).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
