package natsnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Defaults of Config and of gale nats.
const (
	DefaultDataDir     = "gale-nats"
	DefaultHost        = "127.0.0.1"
	DefaultPort        = 4222
	DefaultClusterName = "gale"
)

// Config is an embedded node's configuration. Only DataDir is required.
type Config struct {
	// DataDir holds the credentials file (CredentialsFileName) and JetStream's store
	// (DataDir/jetstream). Created with mode 0700 if missing.
	DataDir string
	// Host and Port are the client listener: DefaultHost and DefaultPort when empty
	// or 0; Port -1 picks a free port.
	Host string
	Port int
	// ServerName names the node in its cluster; it must differ between nodes and stay
	// the same across restarts (JetStream's Raft groups know peers by it). Default:
	// the host name and a hash of DataDir's absolute path.
	ServerName string
	// ClusterHost and ClusterPort are the route listener; ClusterPort 0 (the default)
	// means a node of its own, -1 a free port. ClusterHost defaults to Host.
	ClusterHost string
	ClusterPort int
	// ClusterName is the cluster's name, DefaultClusterName when empty; every node of
	// a cluster uses the same.
	ClusterName string
	// Routes are the other nodes' route listeners (host:port or nats-route://host:port;
	// listing this node's own is harmless, so every node can be given the same list).
	// A clustered node needs at least one. Routes authenticate with a secret derived
	// from the credentials, so every node of a cluster must have the same
	// credentials: see CredentialsFrom.
	Routes []string
	// CredentialsFrom is another node's credentials file, copied into DataDir when
	// DataDir has none; if DataDir has different credentials, Start fails.
	CredentialsFrom string
	// AllowNonLoopback must be set to listen (clients or routes) on an address that
	// is not loopback; the node then warns that whoever reaches it needs the
	// credentials, and that the traffic is not encrypted.
	AllowNonLoopback bool
	// MaxPayload is the largest message the node accepts; 0 keeps the server's
	// default (1 MiB).
	MaxPayload int32
	// Logger receives the server's logs (notices at Info, trace at Debug-4) and the
	// node's warnings; nil discards them.
	Logger *slog.Logger
}

// Node is a running embedded NATS server with JetStream.
type Node struct {
	s       *server.Server
	dataDir string
	creds   string
	name    string
	fatal   *fatalHook
}

// fatalHook keeps the first fatal error the server logs (a listener that could not
// bind, JetStream that could not start), which otherwise only shows as a server
// that never becomes ready.
type fatalHook struct {
	slogAdapter
	mu  sync.Mutex
	err error
}

func (h *fatalHook) Fatalf(format string, v ...any) {
	h.mu.Lock()
	if h.err == nil {
		h.err = errors.New(strings.TrimRight(fmt.Sprintf(format, v...), "\r\n"))
	}
	h.mu.Unlock()
	h.slogAdapter.Fatalf(format, v...)
}

func (h *fatalHook) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Start starts a node and returns once its listeners accept connections (and, on a
// node of its own, JetStream is enabled); on a cluster, Ready waits for JetStream's
// meta leader. ctx bounds the start only: the node runs until Shutdown.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	opts, n, err := options(cfg)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsnode: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n.fatal = &fatalHook{slogAdapter: slogAdapter{logger}}
	bg := context.Background()
	s.SetLoggerV2(n.fatal, logger.Enabled(bg, slog.LevelDebug), logger.Enabled(bg, slog.LevelDebug-4), false)
	n.s = s
	s.Start()
	for !s.ReadyForConnections(25 * time.Millisecond) {
		err := n.fatal.get()
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			n.Shutdown()
			n.WaitForShutdown()
			return nil, fmt.Errorf("natsnode: node did not start: %w", err)
		}
	}
	if err := n.fatal.get(); err != nil || !s.JetStreamEnabled() {
		n.Shutdown()
		n.WaitForShutdown()
		if err == nil {
			err = errors.New("JetStream is not enabled")
		}
		return nil, fmt.Errorf("natsnode: node did not start: %w", err)
	}
	if err := writeSync(n.dataDir, SyncInfo{ServerName: n.name, SyncAlways: opts.SyncAlways}); err != nil {
		n.Shutdown()
		n.WaitForShutdown()
		return nil, err
	}
	for _, a := range []struct {
		what, host string
	}{{"clients", opts.Host}, {"routes", opts.Cluster.Host}} {
		if a.host != "" && !isLoopback(a.host) {
			logger.Warn("natsnode: listening for "+a.what+" on a non-loopback address: whoever reaches it "+
				"needs the credentials, and traffic is not encrypted (no TLS; use a real NATS cluster with TLS across machines)",
				"host", a.host, "credentials", n.creds)
		}
	}
	return n, nil
}

// options checks cfg, fills in its defaults, prepares the data directory and the
// credentials, and returns the server's options.
func options(cfg Config) (*server.Options, *Node, error) {
	if cfg.DataDir == "" {
		return nil, nil, errors.New("natsnode: Config.DataDir is empty")
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("natsnode: %w", err)
	}
	if cfg.Host == "" {
		cfg.Host = DefaultHost
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.ClusterHost == "" {
		cfg.ClusterHost = cfg.Host
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = DefaultClusterName
	}
	clustered := cfg.ClusterPort != 0
	switch {
	case cfg.Port < -1 || cfg.Port > 65535:
		return nil, nil, fmt.Errorf("natsnode: port %d out of range", cfg.Port)
	case cfg.ClusterPort < -1 || cfg.ClusterPort > 65535:
		return nil, nil, fmt.Errorf("natsnode: cluster port %d out of range", cfg.ClusterPort)
	case len(cfg.Routes) > 0 && !clustered:
		return nil, nil, errors.New("natsnode: routes need a cluster listener (ClusterPort, gale nats --cluster-listen)")
	case clustered && len(cfg.Routes) == 0:
		return nil, nil, errors.New("natsnode: a cluster listener needs routes to the cluster's nodes " +
			"(JetStream forms its cluster from them; every node may be given the same list, its own included)")
	case cfg.MaxPayload < 0:
		return nil, nil, fmt.Errorf("natsnode: max payload %d is negative", cfg.MaxPayload)
	}
	if !cfg.AllowNonLoopback {
		if !isLoopback(cfg.Host) {
			return nil, nil, fmt.Errorf("natsnode: %s is not a loopback address: listening beyond this machine needs AllowNonLoopback (gale nats --allow-non-loopback)", cfg.Host)
		}
		if clustered && !isLoopback(cfg.ClusterHost) {
			return nil, nil, fmt.Errorf("natsnode: cluster host %s is not a loopback address: listening beyond this machine needs AllowNonLoopback (gale nats --allow-non-loopback)", cfg.ClusterHost)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("natsnode: %w", err)
	}
	c, created, err := ensureCredentials(dir, cfg.CredentialsFrom)
	if err != nil {
		return nil, nil, fmt.Errorf("natsnode: %w", err)
	}
	if cfg.ServerName == "" {
		cfg.ServerName = defaultName(dir)
	}
	n := &Node{dataDir: dir, creds: CredentialsFile(dir), name: cfg.ServerName}
	if cfg.Logger != nil {
		if created {
			cfg.Logger.Info("natsnode: wrote new credentials", "file", n.creds, "user", c.pub)
		} else if st, err := os.Stat(n.creds); err == nil && st.Mode().Perm()&0o077 != 0 {
			cfg.Logger.Warn("natsnode: the credentials file may be read by others: chmod 600 it", "file", n.creds, "mode", st.Mode().Perm().String())
		}
	}
	o := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
		Nkeys:      []*server.NkeyUser{{Nkey: c.pub}},
		JetStream:  true,
		StoreDir:   dir,
		// fsync every JetStream write (sync_interval: always), not every 2 minutes:
		// an acknowledged write survives a power failure.
		SyncAlways: true,
	}
	if clustered {
		o.Cluster = server.ClusterOpts{
			Name:     cfg.ClusterName,
			Host:     cfg.ClusterHost,
			Port:     cfg.ClusterPort,
			Username: routeUser,
			Password: c.routeSecret(),
		}
		for _, r := range cfg.Routes {
			u, err := routeURL(r, c.routeSecret())
			if err != nil {
				return nil, nil, err
			}
			o.Routes = append(o.Routes, u)
		}
	}
	return o, n, nil
}

// SyncFileName is the file in a node's data directory that says how the node
// syncs JetStream's writes; Start writes it (ReadSync reads it), so that gale
// serve --log jetstream --nats-data DIR can say what PERSISTED means without the
// system account's server information.
const SyncFileName = "gale-sync.json"

// SyncInfo is what SyncFileName holds.
type SyncInfo struct {
	// ServerName is the node's name.
	ServerName string `json:"server_name"`
	// SyncAlways: every JetStream write is fsynced before it is acknowledged
	// (sync_interval: always).
	SyncAlways bool `json:"sync_always"`
}

func writeSync(dir string, si SyncInfo) error {
	b, err := json.Marshal(si)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, SyncFileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("natsnode: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, SyncFileName)); err != nil {
		return fmt.Errorf("natsnode: %w", err)
	}
	return nil
}

// ReadSync reads how the node of dataDir syncs JetStream's writes, as its last
// Start wrote it (an error wrapping fs.ErrNotExist if no node ever started there).
func ReadSync(dataDir string) (SyncInfo, error) {
	var si SyncInfo
	b, err := os.ReadFile(filepath.Join(dataDir, SyncFileName))
	if err != nil {
		return si, fmt.Errorf("natsnode: %w", err)
	}
	if err := json.Unmarshal(b, &si); err != nil {
		return si, fmt.Errorf("natsnode: %s: %w", filepath.Join(dataDir, SyncFileName), err)
	}
	return si, nil
}

// routeURL parses a route (host:port, nats-route://host:port or nats://host:port)
// and gives it the cluster's route credentials unless it has its own.
func routeURL(r, secret string) (*url.URL, error) {
	s := r
	if !strings.Contains(s, "://") {
		s = "nats-route://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("natsnode: route %q: %w", r, err)
	}
	if u.Scheme != "nats-route" && u.Scheme != "nats" {
		return nil, fmt.Errorf("natsnode: route %q: want host:port or nats-route://host:port", r)
	}
	if _, p, err := net.SplitHostPort(u.Host); err != nil || p == "" {
		return nil, fmt.Errorf("natsnode: route %q: want host:port or nats-route://host:port", r)
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("natsnode: route %q: bad port", r)
	}
	u.Scheme = "nats-route"
	if u.User == nil {
		u.User = url.UserPassword(routeUser, secret)
	}
	return u, nil
}

// defaultName is the host name and a hash of the data directory: the same across
// restarts on one directory, and different for two nodes on one machine.
func defaultName(dir string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "gale"
	}
	sum := sha256.Sum256([]byte(dir))
	return h + "-" + hex.EncodeToString(sum[:3])
}

// isLoopback reports whether host names only this machine: localhost or a loopback
// IP. "", 0.0.0.0 and :: (every interface) are not.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ClientURL is the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (n *Node) ClientURL() string { return n.s.ClientURL() }

// ClusterURL is the node's route listener, e.g. nats-route://127.0.0.1:6222 (no
// credentials in it), or "" on a node of its own.
func (n *Node) ClusterURL() string {
	a := n.s.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats-route://" + a.String()
}

// Name is the node's server name.
func (n *Node) Name() string { return n.name }

// DataDir is the node's data directory, absolute.
func (n *Node) DataDir() string { return n.dataDir }

// CredentialsFile is the path of the node's credentials file, absolute.
func (n *Node) CredentialsFile() string { return n.creds }

// Server is the embedded server, for what this package does not wrap.
func (n *Node) Server() *server.Server { return n.s }

// Connect connects to this node with its credentials, then opts.
func (n *Node) Connect(opts ...nats.Option) (*nats.Conn, error) {
	return Connect(n.ClientURL(), n.dataDir, opts...)
}

// Ready waits until JetStream can serve requests: at once on a node of its own; on
// a cluster, until a meta leader is elected and this node has caught up with it
// (which needs a quorum of the nodes). It polls the server's state (it has no
// notification for it) every 10 ms, and fails if the node stops or ctx ends first.
func (n *Node) Ready(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := n.fatal.get(); err != nil {
			return fmt.Errorf("natsnode: %w", err)
		}
		if !n.s.Running() {
			return errors.New("natsnode: the node has shut down")
		}
		if n.s.JetStreamEnabled() {
			if !n.s.JetStreamIsClustered() {
				return nil
			}
			if leader := n.MetaLeader(); leader != "" && n.s.JetStreamIsCurrent() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsnode: JetStream not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// MetaLeader is the name of the JetStream meta leader this node knows of: its own
// name on a node of its own, "" while a cluster has none.
func (n *Node) MetaLeader() string {
	if !n.s.JetStreamIsClustered() {
		if n.s.JetStreamEnabled() {
			return n.name
		}
		return ""
	}
	jsi, err := n.s.Jsz(&server.JSzOptions{})
	if err != nil || jsi.Meta == nil {
		return ""
	}
	return jsi.Meta.Leader
}

// Shutdown stops the node at once, closing its clients and routes; on a cluster the
// Raft groups it led elect new leaders among the other nodes (if a quorum is left).
func (n *Node) Shutdown() { n.s.Shutdown() }

// WaitForShutdown waits until the node has stopped.
func (n *Node) WaitForShutdown() { n.s.WaitForShutdown() }
