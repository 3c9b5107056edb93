package server

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/eventlog/jslog"
)

// JetStream keeps gale serve's event log on a JetStream stream (gale serve --log
// jetstream), and says how Start tells what PERSISTED means there.
type JetStream struct {
	// Log configures the log; its Durability is replaced by the word Start finds
	// (see Durability) unless Ingest.Durability is set.
	Log jslog.Config
	// SysConn, if set, is a connection of the system account (--sys-creds): every
	// server is asked for its JetStream config ($SYS.REQ.SERVER.PING.JSZ).
	SysConn *nats.Conn
	// Embedded, if set, is what an embedded node (gale nats) recorded in the data
	// directory whose credentials the log's connection uses (--nats-data).
	Embedded *natsnode.SyncInfo
	// Recheck is how often Start's server asks again what PERSISTED means, when it
	// found out by asking (not given): servers restarted with another
	// sync_interval, replicas added or moved (default 1 minute; negative: never).
	Recheck time.Duration
}

// Durability says what PERSISTED means on the stream s, as jslog.DurabilityProbe
// finds it: asking the servers through SysConn if set, else trusting the record
// of the embedded node (Embedded), else "unknown". why says which.
func (j *JetStream) Durability(ctx context.Context, s jetstream.Stream) (word, why string) {
	p := jslog.DurabilityProbe{SysConn: j.SysConn}
	if e := j.Embedded; e != nil {
		p.Node = &jslog.NodeSync{ServerName: e.ServerName, SyncAlways: e.SyncAlways, Record: natsnode.SyncFileName}
	}
	return p.Durability(ctx, s)
}
