package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/gale-stream/gale/server"
)

// testCA signs the test's certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gale test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a certificate with serial for 127.0.0.1 (server) or a client, and
// returns its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, serial int64, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "gale test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	// Write then rename, as an operator's tooling would: a reload never reads half a file.
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// serverCert writes a server certificate with serial to dir's cert.pem and key.pem.
func serverCert(t *testing.T, ca *testCA, dir string, serial int64) (string, string) {
	c, k := ca.issue(t, serial, false)
	cp, kp := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cp, c)
	writeFile(t, kp, k)
	return cp, kp
}

func tlsClient(ca *testCA, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: ca.pool()}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// gets GETs url and returns the status and the serial of the server's certificate.
func gets(t *testing.T, c *http.Client, url, token string) (int, int64) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is kept
	resp.Body.Close()
	return resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}

func TestTLSAndMutualTLS(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	cert, key := serverCert(t, ca, dir, 10)
	s := startWith(t, Options{Net: NetOptions{TLSCert: cert, TLSKey: key}})
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", s.URL())
	}
	if code, serial := gets(t, tlsClient(ca, nil), s.URL()+"/v1/lost", ""); code != 200 || serial != 10 {
		t.Fatalf("HTTPS: %d, certificate %d", code, serial)
	}
	a := call(t, tlsClient(ca, nil), "POST", s.URL()+"/v1/events?ack=persisted", eventJSON("tls-1", "s"), "Content-Type", "application/json")
	if a.code != 200 || s.Log.Durable() != 1 {
		t.Fatalf("POST over TLS: %d %s", a.code, a.body)
	}
	// A client that does not trust the CA, and plain HTTP, get nowhere.
	if _, err := http.Get(s.URL() + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	if a := call(t, nil, "GET", strings.Replace(s.URL(), "https", "http", 1)+"/healthz", ""); a.code != 400 {
		t.Fatalf("plain HTTP to the TLS port: %d %s", a.code, a.body)
	}

	// mTLS: a client certificate signed by the client CA is required.
	caFile := filepath.Join(dir, "clients.pem")
	writeFile(t, caFile, ca.pem)
	m := startWith(t, Options{Net: NetOptions{TLSCert: cert, TLSKey: key, TLSClientCA: caFile}})
	if _, err := tlsClient(ca, nil).Get(m.URL() + "/healthz"); err == nil {
		t.Fatal("mTLS: a client without a certificate was served")
	}
	other := newCA(t)
	oc, ok := other.issue(t, 3, true)
	foreign, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsClient(ca, &foreign).Get(m.URL() + "/healthz"); err == nil {
		t.Fatal("mTLS: a client certificate of another CA was served")
	}
	cc, ck := ca.issue(t, 2, true)
	mine, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := gets(t, tlsClient(ca, &mine), m.URL()+"/healthz", ""); code != 200 {
		t.Fatalf("mTLS with a client certificate: %d", code)
	}
}

func TestTLSOptionsThatDoNotGoTogether(t *testing.T) {
	for _, c := range []struct {
		n    NetOptions
		want string
	}{
		{NetOptions{TLSCert: "c.pem"}, "--tls-cert and --tls-key go together"},
		{NetOptions{TLSClientCA: "ca.pem"}, "--tls-client-ca needs --tls-cert"},
		{NetOptions{TLSCert: "/nonexistent/c.pem", TLSKey: "/nonexistent/k.pem"}, "TLS certificate /nonexistent/c.pem"},
	} {
		_, err := start(t.Context(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Net: c.n})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.n, err, c.want)
		}
	}
}

// Reload swaps the tokens and the certificate for what comes next: a kept-alive
// connection goes on (with the certificate it shook hands with), requests during
// reloads all get their answer, and what fails to load keeps the old version.
func TestReloadSwapsTokensAndCertificate(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	cert, key := serverCert(t, ca, dir, 1)
	const a, b, both = "token-a-0123456789abcdef", "token-b-0123456789abcdef", "token-both-0123456789ab"
	tokens := tokensFile(t, a+" read", both+" read")
	s := startWith(t, Options{Net: NetOptions{TokensFile: tokens, TLSCert: cert, TLSKey: key}})
	old := tlsClient(ca, nil)
	if code, serial := gets(t, old, s.URL()+"/v1/lost", a); code != 200 || serial != 1 {
		t.Fatalf("before: %d, certificate %d", code, serial)
	}

	writeFile(t, tokens, []byte(b+" read\n"+both+" read\n"))
	serverCert(t, ca, dir, 2)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, serial := gets(t, old, s.URL()+"/v1/lost", a); code != 401 || serial != 1 {
		t.Fatalf("old token on the kept-alive connection: %d, certificate %d; want 401 on certificate 1", code, serial)
	}
	if code, _ := gets(t, old, s.URL()+"/v1/lost", b); code != 200 {
		t.Fatalf("new token: %d", code)
	}
	if code, serial := gets(t, tlsClient(ca, nil), s.URL()+"/v1/lost", b); code != 200 || serial != 2 {
		t.Fatalf("new connection: %d, certificate %d; want certificate 2", code, serial)
	}

	// A broken tokens file or certificate: an error saying so, the old ones stay.
	writeFile(t, tokens, []byte(b+" read\nnot-a-valid-line-000000\n"))
	writeFile(t, cert, []byte("not a certificate"))
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), "tokens.txt:2: no scopes") || !strings.Contains(err.Error(), "the old ones stay") ||
		!strings.Contains(err.Error(), "the old certificate stays") {
		t.Fatalf("broken reload: %v", err)
	}
	if code, serial := gets(t, tlsClient(ca, nil), s.URL()+"/v1/lost", b); code != 200 || serial != 2 {
		t.Fatalf("after a failed reload: %d, certificate %d", code, serial)
	}

	// Requests in flight across reloads: a token in both versions is never refused.
	serverCert(t, ca, dir, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tlsClient(ca, nil)
			for range 100 {
				req, _ := http.NewRequest("GET", s.URL()+"/v1/lost", nil)
				req.Header.Set("Authorization", "Bearer "+both)
				resp, err := c.Do(req)
				code := -1
				if err == nil {
					code = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
			c.CloseIdleConnections()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reloads := 0
	for running := true; running; reloads++ {
		other := a
		if reloads%2 == 0 {
			other = b
		}
		writeFile(t, tokens, []byte(other+" read\n"+both+" read\n"))
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			running = false
		default:
		}
	}
	if len(codes) != 1 || codes[200] != 400 {
		t.Fatalf("answers during %d reloads: %v; want 400 times 200", reloads, codes)
	}
	t.Logf("400 requests answered during %d reloads", reloads)
}
