package access

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/gale-stream/gale/event"
)

// Options configure a Guard.
type Options struct {
	// TokensFile is read at New and at every Reload (--tokens); empty: none.
	TokensFile string
	// UIToken is a token with the ui scope (--ui-token).
	UIToken string
	// AllowOrigins are the Origins besides the server's own that may call it, as
	// scheme://host[:port] (--allow-origin); "*" allows any.
	AllowOrigins []string
	// Rate limits writes in events per second per token, or per source while no token
	// is configured; 0 is no limit. Burst is the bucket's size (default the rate,
	// at least 1).
	Rate  float64
	Burst int
	// Logger gets reloads (never a token); refusals go to it at debug level.
	Logger *slog.Logger
}

// Guard is the access check in front of the API: New reads the tokens, Wrap guards
// a handler, Admit checks each event's source and rate, Reload re-reads the tokens.
type Guard struct {
	o        Options
	tokens   atomic.Pointer[Set]
	hosts    []string // lower case; "host:port", or "host" for any port; nil: no check
	anyHost  bool
	origins  map[string]bool
	anyOrig  bool
	refusals *prometheus.CounterVec

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// maxLimiters bounds the per-source buckets kept while no token is configured (the
// sources are the clients' to choose): past it they are all forgotten, and start
// full again.
const maxLimiters = 10000

// Reasons are the label values of gale_http_refusals_total.
var Reasons = []string{"host", "origin", "content_type", "no_token", "bad_token", "scope", "source", "rate"}

// New reads the tokens and returns the guard.
func New(o Options) (*Guard, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return nil, fmt.Errorf("access: rate %v: want events per second, 0 for no limit", o.Rate)
	}
	if o.Burst < 0 {
		return nil, fmt.Errorf("access: burst %d: want at least 1", o.Burst)
	}
	if o.Burst == 0 {
		o.Burst = max(1, int(math.Ceil(o.Rate)))
	}
	g := &Guard{o: o, origins: map[string]bool{}, limiters: map[string]*rate.Limiter{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gale_http_refusals_total",
			Help: "Requests, or lines of a batch, refused before reaching the log, by reason: host, origin, content_type, no_token, bad_token, scope, source, rate."},
			[]string{"reason"})}
	for _, r := range Reasons {
		g.refusals.WithLabelValues(r)
	}
	for _, or := range o.AllowOrigins {
		if or == "*" {
			g.anyOrig = true
			continue
		}
		if !strings.Contains(or, "://") {
			return nil, fmt.Errorf("access: allowed origin %q: want scheme://host[:port], e.g. https://app.example.com", or)
		}
		g.origins[strings.ToLower(strings.TrimRight(or, "/"))] = true
	}
	s, err := g.load()
	if err != nil {
		return nil, err
	}
	g.tokens.Store(s)
	return g, nil
}

func (g *Guard) load() (*Set, error) {
	var s *Set
	if g.o.TokensFile != "" {
		var err error
		if s, err = ReadFile(g.o.TokensFile); err != nil {
			return nil, err
		}
	}
	if g.o.UIToken != "" {
		s = s.With(g.o.UIToken, Scopes{UI: true}, "--ui-token")
	}
	return s, nil
}

// Reload re-reads the tokens file and swaps the tokens at once: a request is checked
// against the old set or the new, never a mix. On error the old tokens stay.
func (g *Guard) Reload() error {
	if g.o.TokensFile == "" {
		return nil
	}
	s, err := g.load()
	if err != nil {
		return fmt.Errorf("reloading the tokens (the old ones stay): %w", err)
	}
	g.tokens.Store(s)
	g.o.Logger.Info("tokens reloaded", "file", g.o.TokensFile, "tokens", s.Len())
	return nil
}

// Configured reports whether any token is known: then every route but the probes
// needs one.
func (g *Guard) Configured() bool { return g.tokens.Load().Len() > 0 }

// AllowHosts sets the Host header values answered (call before serving): "host:port",
// or "host" for any port; "*" or none turns the check off.
func (g *Guard) AllowHosts(hosts []string) {
	g.hosts, g.anyHost = nil, len(hosts) == 0
	for _, h := range hosts {
		if h == "*" {
			g.anyHost = true
		}
		g.hosts = append(g.hosts, strings.ToLower(h))
	}
}

// Collector is the refusal counter, for the server's registry.
func (g *Guard) Collector() prometheus.Collector { return g.refusals }

// Refusal is why a request, or one event of it, is refused.
type Refusal struct {
	Code   int    // HTTP status
	Reason string // the metric's label
	Msg    string
	Wait   time.Duration // for 429: when to send again
}

func (e *Refusal) Error() string { return e.Msg }

// HTTPStatus is the answer's status code.
func (e *Refusal) HTTPStatus() int { return e.Code }

// RetryAfter is how long to wait before sending again (429 only).
func (e *Refusal) RetryAfter() time.Duration { return e.Wait }

type ctxKey struct{}

// TokenFrom returns the token a request passed Wrap with (nil while none is
// configured).
func TokenFrom(ctx context.Context) *Token {
	t, _ := ctx.Value(ctxKey{}).(*Token)
	return t
}

// scope is what a route needs.
type scope int

const (
	scopeAny scope = iota
	scopeWrite
	scopeRead
	scopeAdmin
	scopeUI
	scopeOpen
)

func (s scope) String() string {
	return [...]string{"any", "write:SOURCE or write:*", "read", "admin", "ui", "none"}[s]
}

func routeScope(r *http.Request) scope {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/readyz":
		return scopeOpen
	case r.Method == http.MethodPost && (p == "/v1/events" || p == "/v1/events:batch"):
		return scopeWrite
	case strings.HasPrefix(p, "/v1/events/") && r.Method == http.MethodPost, p == "/v1/dead-letters":
		return scopeAdmin
	case strings.HasPrefix(p, "/v1/events/"), p == "/v1/lost":
		return scopeRead
	case p == "/ui" || p == "/ui/" || p == "/ui/app.js" || p == "/ui/style.css":
		return scopeOpen // the page's files hold no data; the page says what is missing
	case strings.HasPrefix(p, "/ui/") || p == "/metrics":
		return scopeUI
	}
	return scopeAny
}

func (t *Token) has(s scope) bool {
	switch s {
	case scopeWrite:
		return t.Scopes.writes()
	case scopeRead:
		return t.Scopes.Read
	case scopeAdmin:
		return t.Scopes.Admin
	case scopeUI:
		return t.Scopes.UI
	}
	return true
}

// Wrap returns next behind the checks, in order: Host, Origin, a POST's
// Content-Type, then the token and the route's scope. /healthz and /readyz pass
// unchecked.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := routeScope(r)
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		if !g.hostAllowed(r) {
			g.refuse(w, r, &Refusal{Code: http.StatusForbidden, Reason: "host",
				Msg: fmt.Sprintf("Host %q is not a name this server answers to (--allow-host)", r.Host)})
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			same := g.sameOrigin(r, origin)
			if !same && !g.anyOrig && !g.origins[strings.ToLower(origin)] {
				g.refuse(w, r, &Refusal{Code: http.StatusForbidden, Reason: "origin",
					Msg: fmt.Sprintf("Origin %q may not call this server (--allow-origin)", origin)})
				return
			}
			if !same {
				h := w.Header()
				h.Set("Access-Control-Allow-Origin", origin)
				h.Add("Vary", "Origin")
				if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
					h.Set("Access-Control-Allow-Methods", "GET, POST")
					h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key")
					h.Set("Access-Control-Max-Age", "600")
					w.WriteHeader(http.StatusNoContent)
					return
				}
			}
		}
		if r.Method == http.MethodPost {
			ct := r.Header.Get("Content-Type")
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || (mt != "application/json" && mt != "application/x-ndjson") {
				g.refuse(w, r, &Refusal{Code: http.StatusUnsupportedMediaType, Reason: "content_type",
					Msg: fmt.Sprintf("Content-Type %q: a POST takes application/json or application/x-ndjson", ct)})
				return
			}
		}
		set := g.tokens.Load()
		if set.Len() == 0 || sc == scopeOpen {
			next.ServeHTTP(w, r)
			return
		}
		secret, ok := bearer(r, sc == scopeUI)
		if !ok {
			g.refuse(w, r, &Refusal{Code: http.StatusUnauthorized, Reason: "no_token",
				Msg: "token required: send Authorization: Bearer TOKEN"})
			return
		}
		tok, ok := set.Lookup(secret)
		if !ok {
			g.refuse(w, r, &Refusal{Code: http.StatusUnauthorized, Reason: "bad_token",
				Msg: "this token is not known to the server"})
			return
		}
		if !tok.has(sc) {
			g.refuse(w, r, &Refusal{Code: http.StatusForbidden, Reason: "scope",
				Msg: fmt.Sprintf("%s %s needs a token with scope %s; this one has: %s", r.Method, r.URL.Path, sc, tok.Scopes)}, "token", tok.Where)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, tok)))
	})
}

// bearer returns the request's bearer token (the scheme is case-insensitive, RFC
// 7235), or with query, ?token= for a browser opening the UI.
func bearer(r *http.Request, query bool) (string, bool) {
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		if t := strings.TrimSpace(h[7:]); t != "" {
			return t, true
		}
	}
	if query {
		if t := r.URL.Query().Get("token"); t != "" {
			return t, true
		}
	}
	return "", false
}

func (g *Guard) hostAllowed(r *http.Request) bool {
	if g.anyHost {
		return true
	}
	h := strings.ToLower(r.Host)
	if _, _, err := net.SplitHostPort(h); err != nil {
		// No port: the scheme's default one.
		if r.TLS != nil {
			h += ":443"
		} else {
			h += ":80"
		}
	}
	name, _, _ := net.SplitHostPort(h)
	for _, a := range g.hosts {
		if a == h || a == name || a == "["+name+"]" {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin is the server's own (the UI's page), as reached
// through r's Host (already checked).
func (g *Guard) sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, e *Refusal, logArgs ...any) {
	g.refusals.WithLabelValues(e.Reason).Inc()
	g.o.Logger.Debug("request refused", append([]any{"reason", e.Reason, "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "code", e.Code}, logArgs...)...)
	if e.Code == http.StatusUnauthorized {
		v := `Bearer realm="gale"`
		if e.Reason == "bad_token" {
			v += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	status := "FAILED_FINAL"
	if e.Code == http.StatusTooManyRequests {
		status = "FAILED_RETRYABLE"
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.Wait)))
	}
	b, _ := json.Marshal(struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}{status, e.Msg})
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Code)
	_, _ = w.Write(b)
}

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// Admit checks the events of a write that passed Wrap: it returns nil when all may
// go in, else one error per event (nil for those admitted): a *Refusal of 403 for a
// source the token does not hold, of 429 past the rate.
func (g *Guard) Admit(r *http.Request, evs []event.Event) []error {
	tok := TokenFrom(r.Context())
	var errs []error
	refuse := func(i int, e *Refusal) {
		if errs == nil {
			errs = make([]error, len(evs))
		}
		errs[i] = e
		g.refusals.WithLabelValues(e.Reason).Inc()
	}
	if tok != nil {
		for i := range evs {
			if !tok.Scopes.MayWrite(evs[i].Source) {
				refuse(i, &Refusal{Code: http.StatusForbidden, Reason: "source",
					Msg: fmt.Sprintf("this token may not write source %q (its scopes: %s)", evs[i].Source, tok.Scopes)})
			}
		}
	}
	if g.o.Rate <= 0 {
		return errs
	}
	// Bucket per token, or per source when there are no tokens; once a bucket is
	// empty the rest of its events in this request wait too (keeping their order).
	now := time.Now()
	empty := map[string]time.Duration{}
	for i := range evs {
		if errs != nil && errs[i] != nil {
			continue
		}
		key := "source:" + evs[i].Source
		if tok != nil {
			key = "token:" + string(tok.Digest[:])
		}
		wait, full := empty[key]
		if !full {
			lim := g.limiter(key)
			if lim.AllowN(now, 1) {
				continue
			}
			res := lim.ReserveN(now, 1)
			wait = res.DelayFrom(now)
			res.CancelAt(now)
			empty[key] = wait
		}
		refuse(i, &Refusal{Code: http.StatusTooManyRequests, Reason: "rate", Wait: wait,
			Msg: fmt.Sprintf("rate limit of %g events/s (burst %d) reached: send again after %ds", g.o.Rate, g.o.Burst, retrySeconds(wait))})
	}
	return errs
}

func (g *Guard) limiter(key string) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.limiters[key]
	if l == nil {
		if len(g.limiters) >= maxLimiters {
			clear(g.limiters)
		}
		l = rate.NewLimiter(rate.Limit(g.o.Rate), g.o.Burst)
		g.limiters[key] = l
	}
	return l
}

// IsLoopback reports whether a listen address serves this machine only: a loopback
// IP or "localhost" (an empty host, 0.0.0.0 or :: serve every interface).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
