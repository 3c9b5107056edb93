// Package pgtest runs a throwaway PostgreSQL server for tests that must stop and
// restart it (a sink outage): Debian's initdb and pg_ctl from
// /usr/lib/postgresql/*/bin, a cluster in a temporary folder, trust authentication,
// listening on a free loopback port only. It never touches the caller's server.
//
// PostgreSQL refuses to run as root; as root the server runs as the postgres user
// (Debian's package makes it), otherwise as the current user.
package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Server is a PostgreSQL cluster of one test.
type Server struct {
	t    testing.TB
	bin  string // folder of initdb, pg_ctl
	dir  string // holds the cluster (data), its socket and its log
	port int
	cred *syscall.Credential // nil: run as the current user
}

// Start makes a cluster and starts its server; the test's cleanup stops it and
// removes its folder. The test is skipped, saying why, when Debian's PostgreSQL is
// not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no Debian PostgreSQL (/usr/lib/postgresql/*/bin/initdb): apt-get install postgresql (.ci/run does)")
	}
	sort.Slice(bins, func(i, j int) bool { return version(bins[i]) < version(bins[j]) })
	s := &Server{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	// Not t.TempDir: its parents are 0700 root's, which the postgres user cannot enter.
	dir, err := os.MkdirTemp("", "gale-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.port = freePort(t)
	s.run("initdb", "-D", s.data(), "-U", "gale", "--auth=trust", "-E", "UTF8", "--no-sync")
	s.StartServer()
	t.Cleanup(func() {
		// Immediate: nothing in it is worth a checkpoint. The server may already be
		// stopped by the test; pg_ctl then fails, which is fine.
		_ = s.cmd("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").Run()
	})
	return s
}

// version orders /usr/lib/postgresql/N/bin paths by N.
func version(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// URL is a connection URL for the server's postgres database (user gale, no password).
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://gale@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", s.port)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// StartServer starts the server (again) and waits until it takes connections.
func (s *Server) StartServer() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.dir)
	s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start")
}

// StopServer stops the server. mode is pg_ctl's: "fast" (clients are disconnected,
// SQLSTATE 57P01) or "immediate" (as a crash).
func (s *Server) StopServer(mode string) {
	s.t.Helper()
	s.run("pg_ctl", "-D", s.data(), "-m", mode, "-w", "-t", "60", "stop")
}

// Log returns the server's log, for a failing test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(s.bin, name), args...)
	c.Dir = s.dir
	if s.cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	// A clean environment: the caller's PG* variables must not point us elsewhere.
	c.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	return c
}

func (s *Server) run(name string, args ...string) {
	s.t.Helper()
	c := s.cmd(name, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out.String(), s.Log())
	}
}

// freePort returns a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
