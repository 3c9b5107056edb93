// Package multilang runs bolts and spouts written in any language, as Storm's
// ShellBolt and ShellSpout: gale starts the program as a subprocess and speaks
// Storm's multilang protocol with it over its stdin and stdout, so programs written
// for Storm (storm.py, storm.js adapters or their own) run unchanged.
//
// # The protocol
//
// Every message is one JSON value followed by a line "end". At start gale sends the
// setup ({"conf", "pidDir", "context"}); the program creates an empty file named by
// its pid in pidDir and answers {"pid": N}. A bolt's program is then sent tuples
// ({"id", "comp", "stream", "task", "tuple"}, the id a string) and at any time sends
// emit, ack, fail, log, error and metrics commands; a spout's program is sent next,
// ack and fail and answers each with emits and logs, then {"command": "sync"}. After
// every emit that is not direct (no "task") gale sends back the list of the tasks
// the tuple went to, unless the emit says "need_task_ids": false; a bolt may read
// such a list where it expected a tuple (keep them in order). A bolt is sent a
// heartbeat tuple (stream "__heartbeat", task -1) every Heartbeat and answers it
// with sync. testdata/galestorm.py is a small client for Python, testdata/lines.js a
// spout for Node.
//
// # Guarantees
//
// A shell bolt's inputs are held from the moment they are written to the program
// until it acks or fails them; its emits are anchored to the held inputs it names,
// so they join their trees as a Go bolt's would; fail fails the trees at once; an
// input neither acked nor failed times out as any other. A shell spout's message
// ids are kept as the program wrote them (SpoutID, the id's JSON text) and come
// back in ack and fail as written.
//
// A program that exits, breaks the protocol (a malformed message, an unknown
// command, an emit gale refuses: an undeclared stream, values not matching the
// declared fields, an anchor it does not hold) or stays silent for the Timeout (a
// bolt: no heartbeat answered nor anything else sent; a spout: no sync) is killed
// with its process group and started again; the error, naming the component, the
// task and the offending text, is reported (the component's error count and
// gale's log). The inputs a bolt's program held are failed then, so each is charged
// one attempt and replayed by its spout.
//
// A stop is never charged: the program runs in its own process group (a Ctrl-C to
// gale does not reach it), dies with gale (parent-death signal SIGKILL), and is
// stopped by gale after the drain: stdin closed, then SIGTERM to its group after
// StopGrace, then SIGKILL. Its exit then fails nothing.
//
// The pipes are bounded: a program slower than its input makes Execute wait (the
// task's input queue fills: backpressure); a message longer than MaxMessage is a
// protocol error. The program's stderr lines go to the task's logger, with the
// component, the task and the pid.
//
// # Differences from Storm
//
// The setup's context carries the task's own component's tasks only, and the
// streams' output fields given with Outputs; gale checks emits against the
// topology's declarations. A spout program is sent activate before its first next
// (a restarted one too) and deactivate when a stop begins; gale deactivate and
// activate on a cluster stop the run and start a new one, so a program sees each at
// most once. A restarted spout program starts from scratch: it may be told ack or
// fail of ids a previous run emitted. A bolt program that ends during a stop's drain
// charges nothing: the next program is sent the inputs it held, under the same ids
// (Storm's worker would die with it, and the inputs time out).
package multilang
