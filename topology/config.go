package topology

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config is a topology's runtime configuration. Start from DefaultConfig: the zero
// value is not valid (its message timeout is 0).
type Config struct {
	// Ackers is the number of acker tasks (Storm's topology.acker.executors). 0 turns
	// tracking off: a tracked spout emit is acked at once, bolt acks and fails send
	// nothing, and MaxSpoutPending has no effect. Default 1.
	Ackers int
	// MessageTimeout is how long a tuple tree may take before the spout fails it
	// (Storm's topology.message.timeout.secs). A tree times out between MessageTimeout
	// and 1.25×MessageTimeout after its emit (rotating buckets, no per-tree timers).
	// At least MinMessageTimeout unless DisableTimeouts. Default 30 s.
	MessageTimeout time.Duration
	// DisableTimeouts turns message timeouts off (Storm's
	// topology.enable.message.timeouts=false), for tests only. Refused together with
	// MaxSpoutPending > 0: a lost tree would then stall the spout for good (STORM-3514).
	DisableTimeouts bool
	// MaxSpoutPending bounds the trees in flight per spout task (Storm's
	// topology.max.spout.pending; seed 000 §5.3). It is checked between NextTuple
	// calls. 0 means unlimited. Default 5000.
	MaxSpoutPending int
	// ReceiveQueue is the capacity of each task's input queue, in tuples (Storm's
	// topology.executor.receive.buffer.size); a full queue blocks the sender
	// (backpressure). Default 16384.
	ReceiveQueue int
	// BatchSize is the number of tuples sent to a task in one transfer. Default 256,
	// at most MaxBatchSize.
	BatchSize int
	// FlushInterval bounds how long an emitted tuple, and the acker messages of a
	// task (a spout's inits, a bolt's acks and fails), wait in a batch that is not
	// full: every FlushInterval the runtime sends what a task holds, even while the
	// task is inside NextTuple or Execute, so a slow spout or bolt does not hold
	// back what it already emitted (Storm 2's topology.batch.flush.interval.millis,
	// there 1 ms). A full queue is not waited for: its batch leaves with the next
	// send. 0 turns timed flushing off: batches leave when full, or at the end of a
	// round of NextTuple calls or of a batch of inputs. Default 10 ms.
	FlushInterval time.Duration
	// ShutdownTimeout bounds the graceful drain of Stop when its context has no deadline.
	// Default 30 s.
	ShutdownTimeout time.Duration
	// Logger receives warnings (refused emits, misuse, a BasicBolt's errors, trees
	// failing or timing out fast: see the engine package) and reported errors.
	// Default slog.Default(), which writes to stderr unless the program sets another.
	Logger *slog.Logger
	// LatencyMetrics records execute and process latency histograms per bolt task (one
	// clock read per input). Counters and the spout's complete latency are always
	// kept. Default true.
	LatencyMetrics bool
}

// MinMessageTimeout is the shortest message timeout accepted: timeouts are checked in
// rotating buckets of a quarter timeout, which must stay well above scheduling noise.
const MinMessageTimeout = time.Millisecond

// MaxBatchSize bounds Config.BatchSize.
const MaxBatchSize = 1 << 16

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Ackers:          1,
		MessageTimeout:  30 * time.Second,
		MaxSpoutPending: 5000,
		ReceiveQueue:    16384,
		BatchSize:       256,
		FlushInterval:   10 * time.Millisecond,
		ShutdownTimeout: 30 * time.Second,
		LatencyMetrics:  true,
	}
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("gale: invalid config")

// Validate reports the first invalid setting, wrapping ErrConfig.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch {
	case c.Ackers < 0:
		return bad("Ackers = %d, must be >= 0 (0 turns tracking off)", c.Ackers)
	case !c.DisableTimeouts && c.MessageTimeout < MinMessageTimeout:
		return bad("MessageTimeout = %v, must be at least %v (start from DefaultConfig; it is a time.Duration, so 30 means 30ns)", c.MessageTimeout, MinMessageTimeout)
	case c.MaxSpoutPending < 0:
		return bad("MaxSpoutPending = %d, must be >= 0 (0 = unlimited)", c.MaxSpoutPending)
	case c.DisableTimeouts && c.MaxSpoutPending > 0 && c.Ackers > 0:
		return bad("DisableTimeouts with MaxSpoutPending = %d: a lost tree would stall the spout for good (STORM-3514); set MaxSpoutPending to 0 or keep timeouts", c.MaxSpoutPending)
	case c.ReceiveQueue < 1:
		return bad("ReceiveQueue = %d, must be >= 1", c.ReceiveQueue)
	case c.BatchSize < 1:
		return bad("BatchSize = %d, must be >= 1", c.BatchSize)
	case c.BatchSize > MaxBatchSize:
		// A task's emitter holds room for a whole batch per output: a billion
		// made a run die of memory after it had started.
		return bad("BatchSize = %d, must be at most %d", c.BatchSize, MaxBatchSize)
	case c.FlushInterval < 0:
		return bad("FlushInterval = %v, must be >= 0 (0 turns timed flushing off)", c.FlushInterval)
	case c.ShutdownTimeout < 0:
		return bad("ShutdownTimeout = %v, must be >= 0", c.ShutdownTimeout)
	}
	return nil
}
