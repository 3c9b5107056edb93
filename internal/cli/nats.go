package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster/natsnode"
)

func natsCmd() *cobra.Command {
	var (
		cfg                natsnode.Config
		listen, clusterLis string
		logLevel, logFmt   string
	)
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Run an embedded NATS node with JetStream for gale's processes (loopback and credentials by default)",
		Long: `Run an embedded NATS server with JetStream until SIGINT or SIGTERM, so one machine
needs nothing installed: gale's workers, submit and serve --nats join it by URL.

It prints its client URL and its credentials file, e.g.
  nats://127.0.0.1:4222 (credentials: /home/me/gale-nats/gale.nk)

The node listens on loopback unless --allow-non-loopback, and refuses every client
without the nkey user generated into DATA/gale.nk on the first start (mode 0600,
reused later; nats.go: nats.NkeyOptionFromSeed, nats CLI: --nkey). JetStream keeps
its data in DATA/jetstream and fsyncs every write (sync_interval: always).

A cluster: give each node --cluster-listen, the same --routes (every node's route
address, its own included), its own --name, and the first node's credentials with
--creds-from on the others' first start, e.g. three nodes on one machine:
  gale nats --data n1 --listen 127.0.0.1:4222 --cluster-listen 127.0.0.1:6222 --name n1 \
    --routes 127.0.0.1:6222,127.0.0.1:6223,127.0.0.1:6224
  gale nats --data n2 --listen 127.0.0.1:4223 --cluster-listen 127.0.0.1:6223 --name n2 \
    --routes 127.0.0.1:6222,127.0.0.1:6223,127.0.0.1:6224 --creds-from n1/gale.nk
  (and n3 likewise)
In production run a real NATS cluster (TLS, accounts) and pass its URL and
credentials to gale's commands instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Host, cfg.Port, err = hostPort("--listen", listen); err != nil {
				return err
			}
			if clusterLis != "" {
				if cfg.ClusterHost, cfg.ClusterPort, err = hostPort("--cluster-listen", clusterLis); err != nil {
					return err
				}
			}
			logger, err := NewLogger(cmd.ErrOrStderr(), logLevel, logFmt)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := natsnode.Start(ctx, cfg)
			if err != nil {
				return err
			}
			stopped := make(chan struct{})
			go func() {
				n.WaitForShutdown()
				close(stopped)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "%s (credentials: %s)\n", n.ClientURL(), n.CredentialsFile())
			var wg sync.WaitGroup
			wg.Go(func() {
				if cfg.ClusterPort != 0 {
					logger.Info("waiting for JetStream's meta leader (a quorum of the cluster's nodes)", "name", n.Name(), "cluster", n.ClusterURL())
				}
				if err := n.Ready(ctx); err == nil {
					logger.Info("JetStream ready", "name", n.Name(), "meta_leader", n.MetaLeader(), "store", n.DataDir())
				}
			})
			defer wg.Wait()
			select {
			case <-ctx.Done():
				logger.Info("shutting down the NATS node")
				n.Shutdown()
				<-stopped
				return nil
			case <-stopped:
				stop() // ends the readiness wait
				return errors.New("the NATS node stopped by itself (see its log above)")
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.DataDir, "data", natsnode.DefaultDataDir, "data directory: the credentials (DATA/gale.nk) and JetStream's store (DATA/jetstream)")
	fl.StringVar(&listen, "listen", net.JoinHostPort(natsnode.DefaultHost, strconv.Itoa(natsnode.DefaultPort)), "client address HOST:PORT (port 0: any free port)")
	fl.StringVar(&clusterLis, "cluster-listen", "", "route address HOST:PORT for other nodes of a cluster (needs --routes; port 0: any free port)")
	fl.StringSliceVar(&cfg.Routes, "routes", nil, "the cluster's route addresses, host:port or nats-route://host:port, comma-separated (this node's own may be listed)")
	fl.StringVar(&cfg.ServerName, "name", "", "this node's name, unique in its cluster and kept across restarts (default: host name and a hash of --data)")
	fl.StringVar(&cfg.ClusterName, "cluster-name", natsnode.DefaultClusterName, "the cluster's name, the same on every node")
	fl.StringVar(&cfg.CredentialsFrom, "creds-from", "", "another node's credentials file, copied into DATA on first start (every node of a cluster shares one)")
	fl.BoolVar(&cfg.AllowNonLoopback, "allow-non-loopback", false, "allow --listen or --cluster-listen on an address beyond this machine (clients still need the credentials; no TLS)")
	fl.Int32Var(&cfg.MaxPayload, "max-payload", 0, "largest message in bytes (0: the server's default, 1 MiB)")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (the server's logs and the node's, on stderr)")
	fl.StringVar(&logFmt, "log-format", "text", "text or json")
	return cmd
}

// hostPort splits a HOST:PORT flag; port 0 is any free port (the node's -1).
func hostPort(flag, s string) (string, int, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: want HOST:PORT", flag, s)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: bad port", flag, s)
	}
	if h == "" {
		return "", 0, fmt.Errorf("%s %q: name the host (0.0.0.0 for every interface, with --allow-non-loopback)", flag, s)
	}
	if port == 0 {
		port = -1
	}
	return h, port, nil
}
