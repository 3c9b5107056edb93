package ingest

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is an event's acknowledgement level (seed 004). The order of the constants
// is the order of progress: a later status never goes back to an earlier one, except
// that a resubmitted dead letter starts again from PERSISTED.
type Status uint8

// Statuses, as the API names them.
const (
	// Accepted: held in this process's memory only; a crash loses it. Given only when
	// the caller asked for ack=accepted.
	Accepted Status = iota + 1
	// Persisted: the record is in the log and the fsync covering it returned; it
	// survives kill -9 and power loss.
	Persisted
	// Processed: its tuple tree completed, so the sink transaction committed.
	Processed
	// FailedRetryable: not taken in (a failed fsync, overload, shutdown); send it again
	// with the same event_id.
	FailedRetryable
	// FailedFinal: will never succeed as sent: invalid, or dead-lettered after max
	// attempts (resubmit with POST /v1/events/{id}:retry).
	FailedFinal
)

var statusNames = [...]string{"", "ACCEPTED", "PERSISTED", "PROCESSED", "FAILED_RETRYABLE", "FAILED_FINAL"}

func (s Status) String() string {
	if int(s) < len(statusNames) && s != 0 {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if i > 0 && n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("unknown status %q", b)
}

// Level is how far an answer waits (the ack= query parameter).
type Level uint8

// Levels.
const (
	LevelAccepted  Level = Level(Accepted)
	LevelPersisted Level = Level(Persisted)
	LevelProcessed Level = Level(Processed)
)

// ParseLevel parses "accepted", "persisted" or "processed".
func ParseLevel(s string) (Level, error) {
	switch s {
	case "accepted":
		return LevelAccepted, nil
	case "persisted":
		return LevelPersisted, nil
	case "processed":
		return LevelProcessed, nil
	}
	return 0, fmt.Errorf("ack=%q: want accepted, persisted or processed", s)
}

func (l Level) String() string {
	switch l {
	case LevelAccepted:
		return "accepted"
	case LevelPersisted:
		return "persisted"
	case LevelProcessed:
		return "processed"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Step names a transition in an event's history. Command-style events (seed 004's
// device control) need received, persisted, started and completed told apart; every
// event gets them.
type Step string

// Steps.
const (
	StepReceived  Step = "received"  // → ACCEPTED
	StepPersisted Step = "persisted" // → PERSISTED
	StepStarted   Step = "started"   // an attempt was emitted into the topology
	StepFailed    Step = "failed"    // an attempt failed or timed out; a retry is due
	// StepInterrupted: an attempt timed out while the sink was unavailable (or
	// overlapping an outage): not the event's fault, so it is not charged, and it is
	// retried once the sink is back.
	StepInterrupted Step = "interrupted"
	StepCompleted   Step = "completed"   // → PROCESSED
	StepDeadLetter  Step = "dead_letter" // → FAILED_FINAL after max attempts
	StepResubmitted Step = "resubmitted" // a dead letter was sent again (:retry)
)

// Transition is one step of an event's history.
type Transition struct {
	Step    Step   `json:"step"`
	Status  Status `json:"status,omitempty"`
	At      int64  `json:"at_unix_nano"`
	Attempt int    `json:"attempt,omitempty"`
	Error   string `json:"error,omitempty"`
	// RetryAt is when the next attempt is due (StepFailed only), Unix nanoseconds.
	RetryAt int64 `json:"retry_at_unix_nano,omitempty"`
	// Approximate: At is not the step's own time. Only on a persisted step whose
	// time the log does not know (a log written before gale kept it, or a kill -9
	// before the time was written): At is then the receipt time, the earliest the
	// event can have been persisted.
	Approximate bool `json:"at_approximate,omitempty"`
}

// MarshalJSON adds a readable time beside the exact one.
func (t Transition) MarshalJSON() ([]byte, error) {
	type plain Transition
	return json.Marshal(struct {
		plain
		Time string `json:"at"`
	}{plain(t), time.Unix(0, t.At).UTC().Format(time.RFC3339Nano)})
}

// EventStatus is what GET /v1/events/{id} answers, and what is kept per event.
type EventStatus struct {
	EventID     string       `json:"event_id"`
	Status      Status       `json:"status"`
	Seq         uint64       `json:"seq,omitempty"`
	Generation  uint32       `json:"generation,omitempty"`
	Attempts    int          `json:"attempts"`
	PayloadHash string       `json:"payload_hash"`
	LastError   string       `json:"last_error,omitempty"`
	Transitions []Transition `json:"transitions"`
	// RecordLost: this is the status document of an event whose record a salvage
	// of the damaged log recorded lost (at LostSeq); the document survived it.
	// Set on answers only, never stored.
	RecordLost bool   `json:"record_lost,omitempty"`
	LostSeq    uint64 `json:"lost_seq,omitempty"`
}

// before reports whether the document is about a record before seq: of an
// earlier generation, or one that is gone (a salvage recorded its seq lost) and
// whose id was sent again since, stored at seq. A document that names no seq
// is taken to be about any.
func (st *EventStatus) before(seq uint64) bool { return st.Seq != 0 && st.Seq < seq }
