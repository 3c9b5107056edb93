package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/gale-stream/gale/ingest/access"
)

// NetOptions say who may reach the API and how much it takes (docs/ingest.md: "Running gale
// serve on a network"). The zero value is today's loopback server.
type NetOptions struct {
	// TokensFile lists the tokens and their scopes (ingest/access); re-read by Reload.
	TokensFile string
	// AllowOrigins are the browser Origins besides the server's own that may call it.
	AllowOrigins []string
	// AllowHosts are the Host values answered; default the listen address, localhost,
	// 127.0.0.1 and [::1], each with the port (and the machine's addresses and name
	// when listening on every interface). "*" turns the check off.
	AllowHosts []string
	// InsecureNoAuth allows a non-loopback Addr without any token.
	InsecureNoAuth bool
	// RateLimit is events per second per token (per source without tokens); 0: none.
	RateLimit float64
	RateBurst int
	// TLSCert and TLSKey serve HTTPS; TLSClientCA also requires client certificates
	// signed by it (mTLS). All three are re-read by Reload.
	TLSCert, TLSKey, TLSClientCA string
	// MaxConns caps the connections served at once (0: no cap); more wait to be
	// accepted.
	MaxConns int
	// Timeouts of the HTTP server (defaults 10s, 60s, 2m).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
}

// newGuard reads the tokens and applies the rule that an open server listens on
// loopback only.
func newGuard(o Options) (*access.Guard, error) {
	// Checked first: an address that cannot be parsed is not loopback either, and
	// that refusal would hide what is wrong with it.
	if err := checkAddr(o.Addr); err != nil {
		return nil, err
	}
	g, err := access.New(access.Options{TokensFile: o.Net.TokensFile, UIToken: o.UIToken,
		AllowOrigins: o.Net.AllowOrigins, Rate: o.Net.RateLimit, Burst: o.Net.RateBurst, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if !g.Configured() && !access.IsLoopback(o.Addr) {
		if !o.Net.InsecureNoAuth {
			return nil, fmt.Errorf("serve: --addr %s is not a loopback address and no token is configured: give --tokens FILE "+
				"(or --insecure-no-auth to let anyone who reaches it write and read)", o.Addr)
		}
		o.Logger.Warn("serving without authentication on a non-loopback address (--insecure-no-auth): anyone who reaches it may write and read", "addr", o.Addr)
	}
	return g, nil
}

// checkAddr reports what is wrong with a listen address, before anything is opened
// (a bad port otherwise fails only at listen, after the log and the sink).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("serve: --addr %q is not a valid address: want HOST:PORT, e.g. 127.0.0.1:8080 (or :8080 for every interface): %w", addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
		return fmt.Errorf("serve: --addr %q is not a valid address: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// allowedHosts is the default Host list for a listener on addr (the bound one).
func allowedHosts(o NetOptions, addr, bound string) []string {
	if len(o.AllowHosts) > 0 {
		return o.AllowHosts
	}
	host, _, _ := net.SplitHostPort(addr)
	_, port, _ := net.SplitHostPort(bound)
	names := []string{"localhost", "127.0.0.1", "::1"}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// Every interface: every address of this machine, and its name.
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					names = append(names, n.IP.String())
				}
			}
		}
		if h, err := os.Hostname(); err == nil {
			names = append(names, h)
		}
	} else {
		names = append(names, host)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, net.JoinHostPort(n, port))
	}
	return out
}

// certs holds the TLS configuration handed to each new connection; Reload swaps it.
type certs struct {
	cur atomic.Pointer[tls.Config]
}

func loadTLS(o NetOptions) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", o.TLSCert, o.TLSKey, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"}}
	if o.TLSClientCA != "" {
		pem, err := os.ReadFile(o.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", o.TLSClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// listen opens the listener: the connection cap, then TLS if configured.
func (s *Server) listen(o Options) error {
	n := o.Net
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if n.TLSClientCA != "" && n.TLSCert == "" {
		return errors.New("serve: --tls-client-ca needs --tls-cert and --tls-key")
	}
	if n.MaxConns < 0 {
		return fmt.Errorf("serve: --max-conns %d: want 0 (no cap) or more", n.MaxConns)
	}
	var cfg *tls.Config
	if n.TLSCert != "" {
		var err error
		if cfg, err = loadTLS(n); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.bound = ln.Addr().String()
	if n.MaxConns > 0 {
		ln = netutil.LimitListener(ln, n.MaxConns)
	}
	if cfg != nil {
		s.certs = &certs{}
		s.certs.cur.Store(cfg)
		// Each handshake takes the configuration current then: a reload applies to
		// new connections, and those open keep theirs.
		ln = tls.NewListener(ln, &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.certs.cur.Load(), nil
		}})
	}
	s.ln = ln
	o.Logger.Info("listening", "addr", s.bound, "tls", cfg != nil, "client_certificates", n.TLSClientCA != "",
		"tokens", s.guard.Configured(), "max_conns", n.MaxConns, "rate_limit", n.RateLimit)
	return nil
}

// httpServer is the server with o's timeouts (defaults as before the flags).
func httpServer(h http.Handler, o NetOptions) *http.Server {
	def := func(d, v time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return v
	}
	// ReadTimeout bounds a body trickled in (a slow client holds memory and a
	// request slot); 60 s carries a 16 MiB batch at ~300 KB/s.
	return &http.Server{Handler: h, ReadHeaderTimeout: def(o.ReadHeaderTimeout, 10*time.Second),
		ReadTimeout: def(o.ReadTimeout, 60*time.Second), IdleTimeout: def(o.IdleTimeout, 2*time.Minute)}
}

// Reload re-reads the tokens file and the TLS certificate, key and client CA (on
// SIGHUP), each swapped at once, without touching requests in flight. What fails to
// load keeps its old version; the error says what and why.
func (s *Server) Reload() error {
	var errs []error
	if err := s.guard.Reload(); err != nil {
		errs = append(errs, err)
	}
	if s.certs != nil {
		if cfg, err := loadTLS(s.Options.Net); err != nil {
			errs = append(errs, fmt.Errorf("reloading TLS (the old certificate stays): %w", err))
		} else {
			s.certs.cur.Store(cfg)
			s.Options.Logger.Info("TLS certificate reloaded", "cert", s.Options.Net.TLSCert)
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.Options.Logger.Error("reload failed", "err", err)
	}
	return err
}

// scheme is the URL scheme served.
func (s *Server) scheme() string {
	if s.certs != nil {
		return "https://"
	}
	return "http://"
}
