// Package natstransport is gale's transport between processes: core NATS carries the
// bytes, gale's codec encodes the messages, and the protocol above the transport
// (package transport/flow and the acker) makes up for what core NATS may lose.
//
// # Processes, connections, prefix
//
// Each process (one engine) makes one Transport on its own *nats.Conn with New, and
// registers the endpoints it hosts: its tasks and its host endpoint. The processes of
// one topology use the same prefix (WithPrefix, default "gale"); every subject is
// under it, so topologies, or tests, can share a server. The caller owns the
// connection (its URL, credentials, TLS, reconnect options) unless WithOwnedConn
// hands it over to Close.
//
// # Subjects and lanes
//
// An endpoint has two subjects, one per lane of transport.Inbox:
//
//	<prefix>.ep.<id>.d   KindTuples (data)            task 7: gale.ep.7.d
//	<prefix>.ep.<id>.c   every other kind (control)   host 3: gale.ep.h3.c
//
// where <id> is the task id, or h<n> for host n (endpoint -n). Register subscribes to
// both (asynchronous subscriptions, so each lane is decoded on its own goroutine and
// control never waits behind data), waits for the server to confirm them, and hands
// each decoded message to an in-process mailbox (a transport.Local), which keeps the
// lanes apart; Unregister and Close unsubscribe. A message is published by the
// sender's process on its destination's subject: NATS keeps one publisher's order on
// one subject, so each lane of a link is in order, and control may overtake data.
//
// With WithLocalDelivery, a message between two endpoints registered on the same
// Transport goes straight to the inbox, as transport.Local delivers it: the tasks of
// one process talk as in local mode, and only what goes to another process is
// encoded and crosses the server. Features then do not promise Serializing. A link
// whose destination registers here goes direct from then on; what the sender's
// transport published to it before, should it come back through the server (in
// flight, or from the reconnect buffer), is dropped and counted, since it would
// arrive after what went direct since: each lane of a link stays in order.
//
// # Frames and max_payload
//
// A NATS message holds one frame: a message as codec.AppendMessage encodes it (it
// begins with codec.Magic and the codec's version; a receiver of another version
// refuses it, counted in Stats with both versions named). No frame exceeds the
// server's max_payload (nats.Conn.MaxPayload, 1 MiB by default). A KindTuples
// message over it is split into frames of whole tuples, each one byte 0xF7, uvarint
// part, uvarint parts, then the codec's encoding of that part's tuples under the
// message's From, To, Epoch, Seq and Pos; the receiver delivers the message once
// its last frame has come. Frames of one link arrive in order or not at all, so a
// frame that is not the next one expected, or a whole message of the link, means one
// was lost: the message is dropped (counted once in Stats.Dropped), never delivered
// in part under its Seq. So is one whose next frame has not come for 30 seconds (its
// last frame lost, and nothing after it on the link), and one left when its
// endpoint is unregistered. A receiver reassembles the messages of at most 1024
// senders at once, holding at most 256 MiB of their frames: past that the least
// recently advanced is dropped. A message that claims a sender outside the topology
// (WithEndpoints) is refused and counted as an error. A single tuple too big for a
// frame, or a control message over max_payload, is a Send error naming its size and
// the limit.
//
// # What may be lost, and how the protocol recovers
//
// Core NATS delivers at most once. A message is lost when its subscriber is a slow
// consumer (past WithPendingLimits: counted in Stats.Dropped; the engine's credits
// bound the data in flight per edge, so the defaults only cap a runaway), when the
// server cuts a connection it cannot write to, when a message is in flight while a
// connection or the server goes down (nats.go then reconnects and re-subscribes by
// itself, and sends what was published meanwhile from its reconnect buffer), and when
// it is sent to an endpoint nobody has subscribed yet. It never duplicates. So
// Features are Ordered, NoDuplicates and Serializing, and not Lossless, and the
// protocol above does the rest (STORM-3763: flow-control state lost on a
// reconnect): credit is cumulative, so a lost grant is superseded by the next; a
// producer without credit probes every tick, and every probe is answered; End and
// host requests are re-sent until acknowledged; a lost tuple or ack times its tree
// out and the spout replays it.
//
// # Unknown endpoints
//
// A publisher cannot tell that nobody subscribes to a subject, so Send decides from
// what it knows: an endpoint registered here is known; one not in the topology
// (WithEndpoints; Endpoints(tasks, hosts) makes it) is unknown, and so is one known
// to have been unregistered. Register and Unregister announce the endpoint on
// <prefix>.dir ("up 7 <instance>", "down 7 <instance>"), so Send refuses an endpoint
// unregistered here at once, and one unregistered by another process once its
// notice has arrived; until then the message is published and lost unseen.
//
// An endpoint may be hosted by two processes at once while a task moves (the new
// host registers it before the old one unregisters it, or the other way round), and
// the notices of two processes are not ordered. So each transport keeps, per
// endpoint, the transports whose last notice of it was "up", and an endpoint is gone
// only when none is left and it is not registered here: the old host of a task
// handed over keeps sending to it, and so does a process that hears the old host's
// "down" after the new one's "up". A "down" from a transport whose "up" was not heard
// (a process started after it, or a lost notice) is not taken as final, since an
// unheard transport may host the endpoint too: such a process publishes to it. The
// directory is best effort: a notice lost to a disconnection is not sent again, and a
// process killed says nothing. A notice of an endpoint outside the topology is
// refused (counted as an error), so the directory holds the topology's endpoints only.
// Without WithEndpoints every other endpoint may exist.
//
// Send never waits for credit or for a consumer: nats.go's Publish buffers (writing
// to the socket when its buffer fills, as TCP lets it; while disconnected, into the
// reconnect buffer, whose overflow is a Send error).
package natstransport
