package ingestmetrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPBuckets are the bounds, in seconds, of gale_http_request_duration_seconds:
// 250 µs to 30 s (an ack=processed answer may wait seconds).
var HTTPBuckets = []float64{250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10, 30}

// httpMetrics counts requests by route, the pattern that matched (never the raw
// path: event ids would make a series each), and status code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gale_http_requests_total",
			Help: "HTTP requests answered, by route (the pattern matched, e.g. \"POST /v1/events\"; unmatched for none) and status code."},
			[]string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gale_http_request_duration_seconds",
			Help: "Time from a request's arrival at the handler to its handler's return, by route.", Buckets: HTTPBuckets},
			[]string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_http_requests_in_flight",
			Help: "HTTP requests being handled now."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// wrap counts the requests next handles. The route is r.Pattern once next has
// returned: every http.ServeMux on the way sets it on the request it was given
// (a handler that passes on a copy, as StripPrefix does, leaves its parent's).
func (m *httpMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx are informational; the final code follows
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (Flush,
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
