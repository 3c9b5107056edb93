package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	. "github.com/gale-stream/gale/server"
)

const (
	ordersTok = "orders-writer-0123456789"
	anyTok    = "any-writer-0123456789"
	readTok   = "reader-0123456789abcdef"
	adminTok  = "admin-0123456789abcdef"
	uiTok     = "ui-viewer-0123456789"
)

func tokensFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func standardTokens(t *testing.T) string {
	return tokensFile(t, "# the test's tokens",
		ordersTok+" write:orders",
		anyTok+" write:*",
		readTok+" read",
		adminTok+" admin",
		uiTok+" ui")
}

// startWith starts a server on a loopback port over a fresh data directory.
func startWith(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	o.DataDir = t.TempDir()
	s, err := start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("HTTP %d, not JSON: %q", a.code, a.body)
	}
	return m
}

// call sends one request; headers are name, value pairs.
func call(t *testing.T, c *http.Client, method, url, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

func eventJSON(id, source string) string {
	return fmt.Sprintf(`{"event_id":%q,"source":%q,"type":"t","payload":{"n":1}}`, id, source)
}

var refusalLine = regexp.MustCompile(`(?m)^gale_http_refusals_total\{reason="([a-z_]+)"\} (\d+)$`)

// refusals reads gale_http_refusals_total from /metrics, by reason.
func refusals(t *testing.T, s *Server, token string) map[string]int {
	t.Helper()
	a := call(t, nil, "GET", s.URL()+"/metrics", "", "Authorization", "Bearer "+token)
	if a.code != 200 {
		t.Fatalf("/metrics: HTTP %d %s", a.code, a.body)
	}
	out := map[string]int{}
	for _, m := range refusalLine.FindAllStringSubmatch(string(a.body), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// The case: a page on another site posts a "simple" request (text/plain, no
// preflight) to a loopback gale serve without tokens. It is refused, and nothing
// reaches the log; so is the same body without Origin but as text/plain, or as
// curl's default form type.
func TestCrossSiteSimplePostWritesNothing(t *testing.T) {
	s := startWith(t, Options{})
	body := eventJSON("evil-1", "devices")
	for _, c := range []struct {
		name    string
		headers []string
		code    int
		want    string
	}{
		{"text/plain from evil.example", []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403, `Origin "http://evil.example" may not call this server`},
		{"json from evil.example", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, 403, `Origin "http://evil.example"`},
		{"null origin", []string{"Content-Type", "application/json", "Origin", "null"}, 403, `Origin "null"`},
		{"text/plain", []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, `Content-Type "text/plain;charset=UTF-8": a POST takes application/json or application/x-ndjson`},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, `application/x-www-form-urlencoded`},
		{"none", nil, 415, `Content-Type ""`},
	} {
		for _, path := range []string{"/v1/events?ack=persisted", "/v1/events:batch?ack=persisted"} {
			a := call(t, nil, "POST", s.URL()+path, body, c.headers...)
			m := a.json(t)
			if a.code != c.code || m["status"] != "FAILED_FINAL" || !strings.Contains(m["error"].(string), c.want) {
				t.Errorf("%s to %s: HTTP %d %s; want %d naming %s", c.name, path, a.code, a.body, c.code, c.want)
			}
		}
	}
	if d := s.Log.Durable(); d != 0 {
		t.Fatalf("durable seq %d after refused requests: something was written", d)
	}
	if _, found, _ := s.Log.Lookup("evil-1"); found {
		t.Fatal("evil-1 is in the log")
	}
	// The server's own page (same origin) and a JSON client may write.
	a := call(t, nil, "POST", s.URL()+"/v1/events?ack=persisted", body, "Content-Type", "application/json; charset=utf-8", "Origin", s.URL())
	if a.code != 200 || a.json(t)["status"] != "PERSISTED" || s.Log.Durable() != 1 {
		t.Fatalf("same-origin JSON: HTTP %d %s, durable %d", a.code, a.body, s.Log.Durable())
	}
	got := refusals(t, s, "")
	if got["origin"] != 6 || got["content_type"] != 6 || got["no_token"] != 0 {
		t.Fatalf("refusals %v; want origin 6, content_type 6", got)
	}
}

// An allowed Origin gets its CORS preflight answered and may then write with a token.
func TestAllowedOriginPreflight(t *testing.T) {
	s := startWith(t, Options{Net: NetOptions{TokensFile: standardTokens(t), AllowOrigins: []string{"https://app.example"}}})
	a := call(t, nil, "OPTIONS", s.URL()+"/v1/events", "", "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	if a.code != 204 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: HTTP %d %v", a.code, a.header)
	}
	a = call(t, nil, "POST", s.URL()+"/v1/events?ack=persisted", eventJSON("app-1", "orders"),
		"Origin", "https://app.example", "Content-Type", "application/json", "Authorization", "Bearer "+ordersTok)
	if a.code != 200 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("allowed origin: HTTP %d %s %v", a.code, a.body, a.header)
	}
	a = call(t, nil, "OPTIONS", s.URL()+"/v1/events", "", "Origin", "https://other.example", "Access-Control-Request-Method", "POST")
	if a.code != 403 || a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: HTTP %d %v", a.code, a.header)
	}
}

// Every scope against the routes it opens and those it does not; 401 and 403 say
// what is missing; the probes and the UI page's own files need no token.
func TestTokenScopes(t *testing.T) {
	s := startWith(t, Options{Net: NetOptions{TokensFile: standardTokens(t)}})
	u := s.URL()
	json := "application/json"
	// One event to read and an unknown one to :retry.
	if a := call(t, nil, "POST", u+"/v1/events?ack=persisted", eventJSON("o-1", "orders"), "Content-Type", json, "Authorization", "Bearer "+ordersTok); a.code != 200 {
		t.Fatalf("write:orders: HTTP %d %s", a.code, a.body)
	}
	for _, c := range []struct {
		token, method, path, body string
		code                      int
		status, want              string
	}{
		{"", "POST", "/v1/events", eventJSON("x-1", "orders"), 401, "FAILED_FINAL", "token required"},
		{"not-a-known-token-00000", "POST", "/v1/events", eventJSON("x-2", "orders"), 401, "FAILED_FINAL", "not known"},
		{readTok, "POST", "/v1/events", eventJSON("x-3", "orders"), 403, "FAILED_FINAL", "needs a token with scope write:SOURCE or write:*; this one has: read"},
		{ordersTok, "POST", "/v1/events", eventJSON("x-4", "devices"), 403, "FAILED_FINAL", `may not write source "devices" (its scopes: write:orders)`},
		{ordersTok, "POST", "/v1/events?ack=persisted", eventJSON("o-2", "orders"), 200, "PERSISTED", ""},
		{anyTok, "POST", "/v1/events?ack=persisted", eventJSON("d-1", "devices"), 200, "PERSISTED", ""},
		{readTok, "GET", "/v1/events/o-1", "", 200, "", ""},
		{readTok, "GET", "/v1/lost", "", 200, "", ""},
		{ordersTok, "GET", "/v1/events/o-1", "", 403, "FAILED_FINAL", "scope read"},
		{readTok, "GET", "/v1/dead-letters", "", 403, "FAILED_FINAL", "scope admin"},
		{adminTok, "GET", "/v1/dead-letters", "", 200, "", ""},
		{readTok, "POST", "/v1/events/nope:retry", "{}", 403, "FAILED_FINAL", "scope admin"},
		{adminTok, "POST", "/v1/events/nope:retry", "{}", 404, "", ""},
		{adminTok, "GET", "/metrics", "", 403, "FAILED_FINAL", "scope ui"},
		{uiTok, "GET", "/v1/events/o-1", "", 403, "FAILED_FINAL", "scope read"},
		{uiTok, "GET", "/ui/api/topology", "", 200, "", ""},
		{"", "GET", "/ui/api/topology", "", 401, "FAILED_FINAL", "token required"},
		{"", "GET", "/healthz", "", 200, "", ""},
		{"", "GET", "/readyz", "", 200, "", ""},
		{"", "GET", "/ui/", "", 200, "", ""},
		{"", "GET", "/v1/nothing-here", "", 401, "FAILED_FINAL", "token required"},
	} {
		h := []string{"Content-Type", json}
		if c.token != "" {
			h = append(h, "Authorization", "Bearer "+c.token)
		}
		a := call(t, nil, c.method, u+c.path, c.body, h...)
		name := fmt.Sprintf("%s %s with %q", c.method, c.path, c.token)
		if a.code != c.code {
			t.Errorf("%s: HTTP %d %s; want %d", name, a.code, a.body, c.code)
			continue
		}
		if c.code == 401 && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: WWW-Authenticate %q", name, a.header.Get("WWW-Authenticate"))
		}
		if c.status != "" || c.want != "" {
			m := a.json(t)
			if m["status"] != c.status || !strings.Contains(fmt.Sprint(m["error"]), c.want) {
				t.Errorf("%s: %s; want status %s, error naming %q", name, a.body, c.status, c.want)
			}
		}
	}
	// A browser opens the UI with ?token= (the ui scope only).
	if a := call(t, nil, "GET", u+"/metrics?token="+uiTok, ""); a.code != 200 {
		t.Fatalf("/metrics?token=: HTTP %d", a.code)
	}
	if a := call(t, nil, "GET", u+"/v1/events/o-1?token="+readTok, ""); a.code != 401 {
		t.Fatalf("?token= on the API: HTTP %d, want 401 (the API takes Authorization only)", a.code)
	}
	// o-1, o-2 and d-1 went in, nothing else.
	if d := s.Log.Durable(); d != 3 {
		t.Fatalf("durable seq %d, want 3", d)
	}
	got := refusals(t, s, uiTok)
	want := map[string]int{"no_token": 4, "bad_token": 1, "scope": 6, "source": 1, "host": 0, "origin": 0, "content_type": 0, "rate": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("gale_http_refusals_total{reason=%q} = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// A batch with a line of a source the token may not write: that line is 403
// FAILED_FINAL naming the source, the others go in; the Go client sends the token
// and the NDJSON type.
func TestBatchLineOfAForeignSource(t *testing.T) {
	s := startWith(t, Options{Net: NetOptions{TokensFile: standardTokens(t)}})
	c := &ingest.Client{URL: s.URL(), Token: ordersTok}
	evs := []event.Event{
		{ID: "b-1", Source: "orders", Type: "t", Payload: []byte(`{}`)},
		{ID: "b-2", Source: "payments", Type: "t", Payload: []byte(`{}`)},
		{ID: "b-3", Source: "orders", Type: "t", Payload: []byte(`{}`)},
	}
	answers, code, err := c.Send(context.Background(), evs, ingest.LevelPersisted, 0)
	if err != nil || code != 200 || len(answers) != 3 {
		t.Fatalf("HTTP %d %+v %v", code, answers, err)
	}
	if answers[0].Status != ingest.Persisted || answers[2].Status != ingest.Persisted ||
		answers[1].Status != ingest.FailedFinal || answers[1].Line != 2 || answers[1].EventID != "b-2" ||
		!strings.Contains(answers[1].Error, `may not write source "payments"`) {
		t.Fatalf("answers %+v", answers)
	}
	if _, found, _ := s.Log.Lookup("b-2"); found || s.Log.Durable() != 2 {
		t.Fatalf("b-2 in the log %v, durable %d", found, s.Log.Durable())
	}
	// Every line foreign: 403 for the batch, each line answered.
	answers, code, err = c.Send(context.Background(), evs[1:2], ingest.LevelPersisted, 0)
	if err != nil || code != 403 || answers[0].Status != ingest.FailedFinal {
		t.Fatalf("all foreign: HTTP %d %+v %v", code, answers, err)
	}
	// Without the token the client hears why.
	c.Token = ""
	answers, code, err = c.Send(context.Background(), evs[:1], ingest.LevelPersisted, 0)
	if code != 401 || err == nil || answers[0].Status != ingest.FailedFinal || !strings.Contains(answers[0].Error, "token required") {
		t.Fatalf("no token: HTTP %d %+v %v", code, answers, err)
	}
	if _, _, err := c.Status(context.Background(), "b-1"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("status without token: %v", err)
	}
	c.Token = readTok
	if st, found, err := c.Status(context.Background(), "b-1"); err != nil || !found || st.Status != ingest.Persisted && st.Status != ingest.Processed {
		t.Fatalf("status with read: %+v %v %v", st, found, err)
	}
}

// Without any token gale serve stays on loopback unless told otherwise.
func TestNonLoopbackAddrNeedsATokenOrInsecureNoAuth(t *testing.T) {
	dir := t.TempDir()
	_, err := start(context.Background(), Options{Addr: "0.0.0.0:0", DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "--addr 0.0.0.0:0 is not a loopback address and no token is configured") {
		t.Fatalf("open 0.0.0.0: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the refused start left %d files in the data directory", len(entries))
	}
	_, err = start(context.Background(), Options{Addr: ":0", DataDir: dir, UIToken: ""})
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("open :0: %v", err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	lg := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	s := startWith(t, Options{Addr: "0.0.0.0:0", Net: NetOptions{InsecureNoAuth: true}, Logger: lg})
	mu.Lock()
	warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "serving without authentication")
	mu.Unlock()
	if !warned {
		t.Fatalf("no warning at start: %s", logs.String())
	}
	// Reached on loopback, the port of the wildcard listener answers.
	port := s.URL()[strings.LastIndex(s.URL(), ":")+1:]
	if a := call(t, nil, "GET", "http://127.0.0.1:"+port+"/v1/lost", ""); a.code != 200 {
		t.Fatalf("insecure server: HTTP %d %s", a.code, a.body)
	}
	// With a token a non-loopback address is fine.
	s2 := startWith(t, Options{Addr: "0.0.0.0:0", Net: NetOptions{TokensFile: standardTokens(t)}})
	port = s2.URL()[strings.LastIndex(s2.URL(), ":")+1:]
	if a := call(t, nil, "GET", "http://127.0.0.1:"+port+"/v1/lost", "", "Authorization", "Bearer "+readTok); a.code != 200 {
		t.Fatalf("server with tokens: HTTP %d %s", a.code, a.body)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The Host check against DNS rebinding: a page of evil.example whose name resolves to
// 127.0.0.1 still sends Host: evil.example.
func TestHostCheck(t *testing.T) {
	s := startWith(t, Options{})
	port := s.URL()[strings.LastIndex(s.URL(), ":")+1:]
	for host, code := range map[string]int{
		"127.0.0.1:" + port: 200, "localhost:" + port: 200, "LocalHost:" + port: 200, "[::1]:" + port: 200,
		"evil.example:" + port: 403, "localhost:1": 403, "localhost": 403, "127.0.0.1.evil.example:" + port: 403,
	} {
		a := call(t, nil, "GET", s.URL()+"/v1/lost", "", "Host", host)
		if a.code != code {
			t.Errorf("Host %s: HTTP %d %s, want %d", host, a.code, a.body, code)
		}
		if code == 403 && !strings.Contains(a.json(t)["error"].(string), "--allow-host") {
			t.Errorf("Host %s: %s", host, a.body)
		}
	}
	// Probes answer whatever the Host.
	if a := call(t, nil, "GET", s.URL()+"/healthz", "", "Host", "evil.example"); a.code != 200 {
		t.Fatalf("/healthz with another Host: %d", a.code)
	}
	if got := refusals(t, s, ""); got["host"] != 4 {
		t.Fatalf("refusals %v, want host 4", got)
	}
	s2 := startWith(t, Options{Net: NetOptions{AllowHosts: []string{"gale.internal", "api.example:8443"}}})
	for host, code := range map[string]int{
		"gale.internal:1234": 200, "gale.internal": 200, "api.example:8443": 200, "api.example:8444": 403,
		"127.0.0.1:" + port: 403,
	} {
		if a := call(t, nil, "GET", s2.URL()+"/v1/lost", "", "Host", host); a.code != code {
			t.Errorf("--allow-host: Host %s: HTTP %d, want %d", host, a.code, code)
		}
	}
}

// A batch larger than MaxBatchLines is refused whole (413) and writes nothing.
func TestBatchLineCap(t *testing.T) {
	s := startWith(t, Options{HTTP: ingest.HTTPOptions{MaxBatchLines: 3}})
	var b strings.Builder
	for i := range 4 {
		b.WriteString(eventJSON(fmt.Sprintf("cap-%d", i), "s") + "\n\n")
	}
	a := call(t, nil, "POST", s.URL()+"/v1/events:batch", b.String(), "Content-Type", "application/x-ndjson")
	if a.code != 413 || !strings.Contains(a.json(t)["error"].(string), "batch of more than 3 events (line 7)") || s.Log.Durable() != 0 {
		t.Fatalf("4 lines: HTTP %d %s, durable %d", a.code, a.body, s.Log.Durable())
	}
	a = call(t, nil, "POST", s.URL()+"/v1/events:batch?ack=persisted", strings.Join(strings.Split(b.String(), "\n")[:6], "\n"), "Content-Type", "application/x-ndjson")
	if a.code != 200 || s.Log.Durable() != 3 {
		t.Fatalf("3 lines: HTTP %d %s, durable %d", a.code, a.body, s.Log.Durable())
	}
}

// Past the rate, events are 429 FAILED_RETRYABLE with Retry-After, line by line; the
// bucket is per source without tokens and per token with them. (A rate of one event
// per 1000 s refills nothing during the test.)
func TestRateLimit(t *testing.T) {
	s := startWith(t, Options{Net: NetOptions{RateLimit: 0.001, RateBurst: 2}})
	batch := eventJSON("r-1", "a") + "\n" + eventJSON("r-2", "a") + "\n" + eventJSON("r-3", "a") + "\n" + eventJSON("r-4", "b") + "\n"
	a := call(t, nil, "POST", s.URL()+"/v1/events:batch?ack=persisted", batch, "Content-Type", "application/x-ndjson")
	var ba ingest.BatchAnswer
	if err := json.Unmarshal(a.body, &ba); err != nil || a.code != 200 || len(ba.Results) != 4 {
		t.Fatalf("HTTP %d %s", a.code, a.body)
	}
	st := []ingest.Status{ba.Results[0].Status, ba.Results[1].Status, ba.Results[2].Status, ba.Results[3].Status}
	if st[0] != ingest.Persisted || st[1] != ingest.Persisted || st[2] != ingest.FailedRetryable || st[3] != ingest.Persisted ||
		!strings.Contains(ba.Results[2].Error, "rate limit of 0.001 events/s (burst 2)") {
		t.Fatalf("statuses %v: %s", st, a.body)
	}
	a = call(t, nil, "POST", s.URL()+"/v1/events", eventJSON("r-5", "a"), "Content-Type", "application/json")
	ra, _ := strconv.Atoi(a.header.Get("Retry-After"))
	if a.code != 429 || a.json(t)["status"] != "FAILED_RETRYABLE" || ra < 900 || ra > 1000 {
		t.Fatalf("single event past the rate: HTTP %d Retry-After %q %s", a.code, a.header.Get("Retry-After"), a.body)
	}
	// A batch all past the rate: 429 with Retry-After.
	a = call(t, nil, "POST", s.URL()+"/v1/events:batch", eventJSON("r-6", "a")+"\n", "Content-Type", "application/x-ndjson")
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); a.code != 429 || ra < 900 {
		t.Fatalf("batch past the rate: HTTP %d Retry-After %q", a.code, a.header.Get("Retry-After"))
	}
	if d := s.Log.Durable(); d != 3 {
		t.Fatalf("durable %d, want 3 (r-1, r-2, r-4)", d)
	}

	// Per token: two tokens writing the same source have a bucket each.
	s2 := startWith(t, Options{Net: NetOptions{TokensFile: standardTokens(t), RateLimit: 0.001, RateBurst: 1}})
	for _, c := range []struct {
		tok, id string
		code    int
	}{{ordersTok, "t-1", 200}, {ordersTok, "t-2", 429}, {anyTok, "t-3", 200}, {anyTok, "t-4", 429}} {
		a := call(t, nil, "POST", s2.URL()+"/v1/events?ack=persisted", eventJSON(c.id, "orders"), "Content-Type", "application/json", "Authorization", "Bearer "+c.tok)
		if a.code != c.code {
			t.Fatalf("%s: HTTP %d %s, want %d", c.id, a.code, a.body, c.code)
		}
	}
	if got := refusals(t, s2, uiTok); got["rate"] != 2 {
		t.Fatalf("refusals %v, want rate 2", got)
	}
}
