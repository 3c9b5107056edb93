package natsjs

import "errors"

// Errors of this package; match them with errors.Is. Each is wrapped with what was
// wrong, and with the NATS error underneath when there is one.
var (
	// ErrOption: a constructor's argument or option is invalid (the message names it).
	ErrOption = errors.New("natsjs: invalid option")
	// ErrAckWait: the consumer's AckWait is shorter than the latest a tuple tree can
	// time out (1.25 × Config.MessageTimeout): the server would redeliver a message
	// while its tree may still be in flight. Also matches ErrOption.
	ErrAckWait = errors.New("natsjs: AckWait shorter than the message timeout allows")
	// ErrNoStream: no JetStream stream captures a subject the sink publishes to, or
	// the spout dead-letters to, when the task is prepared or opened.
	ErrNoStream = errors.New("natsjs: no stream captures the subject")
	// ErrInput: an input of the sink lacks a field it needs, or holds a value of
	// another type; the input is failed with it (the event's own fault).
	ErrInput = errors.New("natsjs: bad input tuple")
)
