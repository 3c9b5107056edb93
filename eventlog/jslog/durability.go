package jslog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DurabilityProbe finds what PERSISTED means on a log's stream, the word every
// answer that names a seq carries (Config.Durability, ingest.Config.Durability).
// A stream's acknowledgement says a quorum of its replicas stored the record; it
// does not say whether they fsynced it, which each NATS server decides for itself
// (sync_interval; NATS's default fsyncs every 2 minutes). So the probe asks the
// servers when it can (SysConn), else trusts what an embedded node recorded of
// itself (Node), else says it cannot tell.
type DurabilityProbe struct {
	// SysConn, if set, is a connection of the system account: every server is
	// asked for its JetStream config ($SYS.REQ.SERVER.PING.JSZ).
	SysConn *nats.Conn
	// Node, if set, is what an embedded node (gale nats) recorded of how it syncs,
	// read from the data directory whose credentials the log's connection uses.
	Node *NodeSync
}

// NodeSync is an embedded node's record of how it syncs JetStream's writes
// (natsnode.SyncInfo).
type NodeSync struct {
	// ServerName is the node's name.
	ServerName string
	// SyncAlways: every write is fsynced before it is acknowledged.
	SyncAlways bool
	// Record names the file the record was read from, for the operator
	// (natsnode.SyncFileName).
	Record string
}

// Durability says what PERSISTED means on the stream s: "replicated:N+fsync" when
// every server holding a replica fsyncs each write (sync_interval: always),
// "replicated:N" when one of them does not, "unknown" when it cannot be told.
// With SysConn every server that answers within a second is asked, and each of
// the stream's replicas must have answered for "+fsync"; without it, Node's
// record is trusted for the whole cluster, whose nodes all share its credentials
// (their routes authenticate with a secret derived from them, so each was started
// by gale nats, which always syncs). why says which, for the operator.
func (p DurabilityProbe) Durability(ctx context.Context, s jetstream.Stream) (word, why string) {
	info := s.CachedInfo()
	n := info.Config.Replicas
	if n < 1 {
		n = 1
	}
	word = fmt.Sprintf("replicated:%d", n)
	var replicas []string // the servers holding the stream, when clustered
	if c := info.Cluster; c != nil && c.Leader != "" {
		replicas = append(replicas, c.Leader)
		for _, p := range c.Replicas {
			replicas = append(replicas, p.Name)
		}
	}
	if p.SysConn != nil {
		syncs, err := pingJSZ(ctx, p.SysConn, replicas)
		if err != nil {
			return "unknown", "asking the servers ($SYS.REQ.SERVER.PING.JSZ): " + err.Error()
		}
		var not, missing []string
		for name, always := range syncs {
			if !always {
				not = append(not, name)
			}
		}
		for _, r := range replicas {
			if _, ok := syncs[r]; !ok {
				missing = append(missing, r)
			}
		}
		slices.Sort(not)
		switch {
		case len(not) > 0:
			return word, "not every write fsynced (sync_interval is not always) on " + strings.Join(not, ", ")
		case len(missing) > 0:
			return "unknown", "no answer from " + strings.Join(missing, ", ")
		case len(syncs) == 0:
			return "unknown", "no server answered"
		}
		return word + "+fsync", fmt.Sprintf("sync_interval: always on every server that answered (%d)", len(syncs))
	}
	if n := p.Node; n != nil {
		if !n.SyncAlways {
			return word, "the embedded node " + n.ServerName + " does not fsync every write"
		}
		return word + "+fsync", "embedded nodes (gale nats) fsync every write: " + n.Record + " of " + n.ServerName
	}
	return "unknown", "not told: give --sys-creds (the system account) to ask the servers"
}

// pingJSZ asks every server for its JetStream config and returns, by server name,
// whether it fsyncs every write. It waits until each of want answered, or (want
// empty) a quarter second passed without a new answer, at most a second.
func pingJSZ(ctx context.Context, nc *nats.Conn, want []string) (map[string]bool, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SYS.REQ.SERVER.PING.JSZ", inbox, []byte(`{}`)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	out := map[string]bool{}
	for {
		wait := 250 * time.Millisecond
		if len(want) > 0 || len(out) == 0 {
			wait = time.Second
		}
		mctx, mcancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(mctx)
		mcancel()
		if err != nil {
			return out, nil // the second, or the quiet spell, is over
		}
		var r struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Data *struct {
				Config struct {
					SyncAlways bool `json:"sync_always"`
				} `json:"config"`
			} `json:"data"`
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return out, fmt.Errorf("an answer that is not JSZ: %w", err)
		}
		if r.Error != nil || r.Data == nil {
			continue // that server has no JetStream: it holds no replica
		}
		out[r.Server.Name] = r.Data.Config.SyncAlways
		done := len(want) > 0
		for _, w := range want {
			if _, ok := out[w]; !ok {
				done = false
			}
		}
		if done {
			return out, nil
		}
	}
}
