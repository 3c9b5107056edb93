// Package natsnode runs an embedded NATS server (github.com/nats-io/nats-server/v2)
// with JetStream, so that gale on one machine, or a few, needs nothing installed:
// `gale nats` is this package behind a command, and gale's workers, submit and
// serve --nats join it by URL like any NATS server.
//
// # Not an open door
//
// A node listens on 127.0.0.1 (port 4222) by default. Listening on another address
// (0.0.0.0, a LAN address) takes Config.AllowNonLoopback (gale nats
// --allow-non-loopback), and the node then logs a warning: whoever reaches it needs
// the credentials, and nothing is encrypted (the embedded node has no TLS).
//
// Every client must authenticate. On its first start a node generates an nkey user
// (an ed25519 key pair, as NATS defines it) and writes its seed into the data
// directory, DataDir/gale.nk, mode 0600; later starts reuse it, and the server
// accepts that user only. A client proves it holds the seed by signing a nonce the
// server sends, so the secret never crosses the wire (a password would, in clear,
// without TLS). The file is a plain NATS nkey seed file: nats.go reads it with
// nats.NkeyOptionFromSeed and the nats CLI with --nkey; gale's commands read it with
// ClientOptions(dataDir) or Connect(url, dataDir). A client without it, or with
// another node's, is refused with nats.ErrAuthorization ("Authorization Violation").
//
// # Durability
//
// JetStream's store is DataDir/jetstream, and the node fsyncs every write
// (server.Options.SyncAlways, the config file's `sync_interval: always`) instead of
// the server's default of every 2 minutes: what JetStream acknowledged survives a
// power failure, at the cost of an fsync per write (Jepsen lost acknowledged writes
// of NATS 2.12.1 on power failure with the default). Start records the setting in
// DataDir/gale-sync.json (ReadSync), which gale serve --log jetstream --nats-data
// reads to say what PERSISTED means ("replicated:N+fsync").
//
// # Clustering with routes
//
// Nodes form a cluster over routes: each gets a route listener (ClusterPort, gale
// nats --cluster-listen) and the route listeners of the others (Routes, --routes;
// the same list for every node, its own included, is fine), a name of its own that
// stays the same across restarts (ServerName, --name; default the host name and a
// hash of the data directory) and the cluster's name (ClusterName, default "gale").
// JetStream then runs its meta group and each stream's Raft group over the routes,
// so a KV bucket with Replicas 3 outlives one lost node of three. Start returns once
// a node listens; Ready waits until JetStream has a meta leader, which needs a
// quorum of the nodes.
//
// Routes authenticate too: with user "gale-route" and a password derived from the
// seed (an HMAC of a fixed label under it), so the nodes of a cluster must share
// one credentials file, and one file is the whole secret of the cluster: clients
// use it at any node, and a node with other credentials is refused by the others.
// Start the first node, then give the others its file with Config.CredentialsFrom
// (--creds-from FILE), which copies it into their data directory on first start (a
// data directory that already holds other credentials is an error).
//
// # In production
//
// The embedded node is for one machine, a demo, tests, or a small trusted network.
// Across machines, run a real NATS cluster (three or five nats-server processes,
// with TLS on client and route connections, accounts with JWT or nkey users, and
// jetstream { sync_interval: always } if acknowledged writes must survive a power
// loss), and give gale's commands its URL and credentials as nats.go takes them:
// --nats URL --creds FILE (or an nkey seed file, TLS certificates), with subjects
// under a prefix of gale's own so several deployments can share the cluster.
package natsnode
