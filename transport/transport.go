// Package transport is the contract between gale's engine and whatever carries its
// messages between tasks: in this process (Local), or between processes (NATS, next).
//
// # Messages, not queues
//
// Everything tasks say to each other is a Message addressed from one endpoint to
// another. An endpoint is a task (spout, bolt or acker: ids 1 and up) or a host, the
// engine instance of one process (ids -1 and down: host h is -h). A transport only
// delivers messages; it never blocks a sender, never knows a queue's length and never
// closes anything on a sender's behalf. Flow control, end of stream, duplicate
// suppression and re-sends are the protocol above it (package transport/flow), so
// that the same engine runs over any transport that keeps this contract.
//
// # Lanes
//
// KindTuples is the data lane; every other kind is control. An Inbox hands out
// control apart from data (TakeControl, TakeTuples), so control is never stuck
// behind data (STORM-3637, STORM-3314): an acker keeps acking, a spout keeps
// receiving outcomes and a blocked sender keeps receiving credit while data waits.
//
// # What may be lost, and how the protocol survives it
//
// A transport may lose, duplicate or reorder any message, and must say which it does
// (Features). Reliability comes from the acker and from the protocol:
//
//   - KindTuples, KindAcks, KindOutcomes: a loss makes a tuple tree time out and its
//     spout replay it; a duplicate is dropped by the receiver (flow.Dedupe), so an
//     edge's XOR is never applied twice.
//   - KindCredit is cumulative (the position a sender may send up to), so a lost
//     credit is superseded by the next; a sender that waits for credit sends
//     KindProbe every tick, and every probe is answered by a credit.
//   - KindEnd (end of stream on an edge) and KindControl requests are re-sent until
//     acknowledged (KindEndAck, a KindControl reply).
//
// A lost message therefore delays a flow but never deadlocks it.
package transport

import (
	"errors"
	"fmt"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/tuple"
)

// Kind is what a Message carries.
type Kind uint8

// Message kinds. Only KindTuples is data; every other kind is control.
const (
	// KindTuples is a batch of tuples on the edge From -> To. Pos is the edge's
	// position after the batch: the number of tuples From has sent To so far.
	KindTuples Kind = iota + 1
	// KindAcks carries acker messages to an acker task.
	KindAcks
	// KindOutcomes carries tree outcomes from an acker task to a spout task.
	KindOutcomes
	// KindCredit grants room on the edge To -> From: From is the receiving task,
	// and To may send while its position is below Pos. Cumulative: a larger Pos
	// replaces a smaller one.
	KindCredit
	// KindProbe asks From's consumer To for credit on the edge From -> To; Pos is
	// From's position on the edge. Sent each tick while From waits for credit.
	KindProbe
	// KindEnd says From sends To nothing more after position Pos. Re-sent until a
	// KindEndAck comes back.
	KindEnd
	// KindEndAck acknowledges a KindEnd of the edge To -> From.
	KindEndAck
	// KindControl is a host-level request or reply (stop, drain, flush, stats,
	// lineage): Op names it and Body holds it, encoded by the engine.
	KindControl
)

var kindNames = [...]string{"", "tuples", "acks", "outcomes", "credit", "probe", "end", "end-ack", "control"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Control reports whether k travels on the control lane (every kind but KindTuples).
func (k Kind) Control() bool { return k != KindTuples }

// Message is one delivery from one endpoint to another. Once sent it belongs to the
// transport, and once taken from an Inbox to the receiver.
type Message struct {
	Kind Kind
	// From and To are endpoints: a task id (>= 1) or a host (-h for host h).
	From, To int
	// Epoch names the sending engine's incarnation (random at its start), and Seq
	// numbers its messages on the link From -> To from 1: together they let the
	// receiver drop duplicates and notice a restarted sender (flow.Dedupe).
	Epoch uint64
	Seq   uint64
	// Pos is an edge position (see the kinds).
	Pos uint64
	// Tuples (KindTuples): each tuple's DstTask is To.
	Tuples []*tuple.Tuple
	// Acks (KindAcks).
	Acks []acker.Msg
	// Outcomes (KindOutcomes).
	Outcomes []acker.Outcome
	// Op and Body (KindControl): the operation and its encoding. ID matches a
	// reply to its request.
	Op   uint8
	ID   uint64
	Body []byte
}

// Host returns the endpoint id of host h (h >= 1).
func Host(h int) int { return -h }

// Features is what a transport promises, in the manner of watermill's
// tests.Features: the conformance suite checks each promise it makes, and tolerates
// what it does not promise.
type Features struct {
	// Ordered: messages on one link (From -> To) arrive in the order sent.
	Ordered bool
	// Lossless: every message sent to a registered endpoint arrives while both ends
	// run.
	Lossless bool
	// NoDuplicates: no message arrives twice.
	NoDuplicates bool
	// Serializing: every message crosses the codec (no pointer is shared between
	// sender and receiver).
	Serializing bool
}

// Stats are a transport's counters. Errors are counted here and surfaced by the
// engine (its Stats and logs), never swallowed.
type Stats struct {
	Sent, Delivered uint64
	// Dropped counts messages lost on purpose or by fault (a test transport's
	// drops, a message for an endpoint that closed).
	Dropped uint64
	// Errors counts failed sends (an unknown endpoint, an encoding error, a
	// connection error); LastError is the newest.
	Errors    uint64
	LastError string
}

// Transport delivers messages between endpoints.
type Transport interface {
	// Register creates the receiving end of an endpoint hosted in this process.
	Register(endpoint int) (Inbox, error)
	// Unregister removes it (an engine that stopped, or failed to start): later
	// messages to it fail as an unknown endpoint, and it may be registered again.
	Unregister(endpoint int)
	// Send delivers m to m.To. It never blocks. An error (unknown endpoint, closed
	// transport, a value that cannot be encoded) is also counted in Stats.
	Send(m *Message) error
	// Features says what the transport promises.
	Features() Features
	// Stats returns the counters.
	Stats() Stats
	// Close stops delivery: later Sends fail with ErrClosed.
	Close() error
}

// Inbox is the receiving end of one endpoint.
type Inbox interface {
	// Signal receives a value when messages may be waiting (of either lane).
	Signal() <-chan struct{}
	// TakeControl appends every waiting control message to dst and returns it.
	TakeControl(dst []*Message) []*Message
	// TakeTuples appends the waiting KindTuples messages to dst and returns it.
	TakeTuples(dst []*Message) []*Message
	// Tuples reports how many tuples wait in KindTuples messages.
	Tuples() int
}

// Errors.
var (
	ErrUnknownEndpoint = errors.New("transport: unknown endpoint")
	ErrClosed          = errors.New("transport: closed")
)
