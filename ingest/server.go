package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// HTTPOptions bound what the HTTP API takes in.
type HTTPOptions struct {
	// MaxEventBytes caps the body of POST /v1/events (default 1 MiB): 413 beyond.
	MaxEventBytes int64
	// MaxBatchBytes caps the body of POST /v1/events:batch (default 16 MiB).
	MaxBatchBytes int64
	// MaxBatchLines caps the events of one batch (default 10,000): 413 beyond, for
	// the whole batch, as a body too large.
	MaxBatchLines int
	// Admit, when set, is asked about the parsed events of a write before they are
	// submitted (the access guard: the sources a token may write, rate limits). It
	// returns nil to admit all, or one error per event: nil admits that one, an error
	// refuses it alone with the status its HTTPStatus() int gives (default 403),
	// FAILED_RETRYABLE for 429 and 503 (Retry-After from its RetryAfter()
	// time.Duration), else FAILED_FINAL.
	Admit func(r *http.Request, evs []event.Event) []error
	// Ready, when set, is consulted by /readyz besides the service (e.g. the
	// topology is running).
	Ready func() error
}

// Handler returns the HTTP API of s:
//
//	POST /v1/events              one JSON event        ?ack=accepted|persisted|processed&wait=10s
//	POST /v1/events:batch        NDJSON, one per line  (same parameters)
//	GET  /v1/events/{id}         status, transitions, attempts
//	POST /v1/events/{id}:retry   resubmit a dead letter
//	GET  /v1/dead-letters        ?limit=100
//	GET  /v1/lost                seq ranges (and ids) a salvage of the log lost: send them again
//	GET  /healthz, /readyz
//
// Status codes: 200 PERSISTED or PROCESSED (also for a duplicate, with
// "duplicate": true), 202 ACCEPTED, 400 invalid (FAILED_FINAL, naming the field), 409
// event_id reused with another payload, 413 too large, 422 FAILED_FINAL after max
// attempts, 429 overloaded and 503 log failed or shutting down (FAILED_RETRYABLE,
// with Retry-After); with HTTPOptions.Admit (ingest/access), 403 for an event whose
// source the token may not write and 429 past a rate limit. The handler checks no
// token, Origin or Content-Type itself: gale serve puts access.Guard in front.
func (s *Service) Handler(o HTTPOptions) http.Handler {
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = 1 << 20
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 16 << 20
	}
	if o.MaxBatchLines <= 0 {
		o.MaxBatchLines = DefaultMaxBatchLines
	}
	h := &handler{s: s, o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/events", h.postEvent)
	mux.HandleFunc("POST /v1/events:batch", h.postBatch)
	mux.HandleFunc("GET /v1/events/{id...}", h.getEvent)
	mux.HandleFunc("POST /v1/events/{id...}", h.postRetry)
	mux.HandleFunc("GET /v1/dead-letters", h.deadLetters)
	mux.HandleFunc("GET /v1/lost", h.lost)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", h.ready)
	return mux
}

// DefaultMaxBatchLines is HTTPOptions.MaxBatchLines's default: a batch answer stays
// about 1 MB, and one request's group commit bounded.
const DefaultMaxBatchLines = 10000

type handler struct {
	s *Service
	o HTTPOptions
}

// Answer is the JSON answer for one event.
type Answer struct {
	Line      int    `json:"line,omitempty"` // 1-based line in a batch
	EventID   string `json:"event_id,omitempty"`
	Status    Status `json:"status,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	// RecordLost: the answer is the surviving status document of an event whose
	// record (at LostSeq) a salvage recorded lost: a resend of a PROCESSED
	// event's id, its duplicate or a conflict.
	RecordLost  bool   `json:"record_lost,omitempty"`
	LostSeq     uint64 `json:"lost_seq,omitempty"`
	Attempts    int    `json:"attempts,omitempty"`
	PayloadHash string `json:"payload_hash,omitempty"`
	Error       string `json:"error,omitempty"`
	// Durability says what PERSISTED means on this server (Config.Durability):
	// "fsync" (the local log, fsynced), "replicated:N+fsync", "replicated:N" (stored
	// by a quorum of N replicas, not fsynced by each) or "unknown". Set exactly
	// when Seq is: not on ACCEPTED answers, nor on invalid or refused events.
	Durability string `json:"durability,omitempty"`
	code       int
	retryAfter time.Duration
}

func answerOf(r Result) Answer {
	a := Answer{EventID: r.Status.EventID, Status: r.Status.Status, Duplicate: r.Duplicate, Seq: r.Status.Seq,
		RecordLost: r.Status.RecordLost, LostSeq: r.Status.LostSeq, Attempts: r.Status.Attempts, PayloadHash: r.Status.PayloadHash}
	switch {
	case errors.Is(r.Err, ErrConflict):
		a.Status, a.Error, a.code = FailedFinal, r.Err.Error(), http.StatusConflict
	case errors.Is(r.Err, eventlog.ErrOverloaded):
		a.Status, a.Error, a.code = FailedRetryable, r.Err.Error(), http.StatusTooManyRequests
	case r.Err != nil || a.Status == FailedRetryable:
		a.Status, a.code = FailedRetryable, http.StatusServiceUnavailable
		a.Error = r.Status.LastError
		if r.Err != nil {
			a.Error = r.Err.Error()
		}
	case a.Status == FailedFinal:
		a.Error, a.code = r.Status.LastError, http.StatusUnprocessableEntity
	case a.Status == Accepted:
		a.code = http.StatusAccepted
	default:
		a.code = http.StatusOK
	}
	return a
}

func invalid(line int, id string, err error) Answer {
	return Answer{Line: line, EventID: id, Status: FailedFinal, Error: err.Error(), code: http.StatusBadRequest}
}

// refused is the answer for an event HTTPOptions.Admit did not let in.
func refused(line int, id string, err error) Answer {
	a := Answer{Line: line, EventID: id, Status: FailedFinal, Error: err.Error(), code: http.StatusForbidden}
	var c interface{ HTTPStatus() int }
	if errors.As(err, &c) {
		a.code = c.HTTPStatus()
	}
	if a.code == http.StatusTooManyRequests || a.code == http.StatusServiceUnavailable {
		a.Status = FailedRetryable
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			a.retryAfter = ra.RetryAfter()
		}
	}
	return a
}

// admit asks HTTPOptions.Admit about evs; errs is nil when all are admitted.
func (h *handler) admit(r *http.Request, evs []event.Event) []error {
	if h.o.Admit == nil || len(evs) == 0 {
		return nil
	}
	return h.o.Admit(r, evs)
}

func (h *handler) params(w http.ResponseWriter, r *http.Request) (Level, time.Duration, bool) {
	var lvl Level
	if v := r.URL.Query().Get("ack"); v != "" {
		l, err := ParseLevel(v)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, Answer{Status: FailedFinal, Error: err.Error()})
			return 0, 0, false
		}
		lvl = l
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 10*time.Minute {
			writeJSON(w, http.StatusBadRequest, Answer{Status: FailedFinal, Error: fmt.Sprintf("wait=%q: want a duration such as 5s, at most 10m", v)})
			return 0, 0, false
		}
		wait = d
	}
	return lvl, wait, true
}

func (h *handler) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeJSON(w, http.StatusRequestEntityTooLarge, Answer{Status: FailedFinal,
				Error: fmt.Sprintf("body larger than %d bytes", limit)})
		} else {
			writeJSON(w, http.StatusBadRequest, Answer{Status: FailedRetryable, Error: "reading body: " + err.Error()})
		}
		return nil, false
	}
	return body, true
}

func (h *handler) postEvent(w http.ResponseWriter, r *http.Request) {
	lvl, wait, ok := h.params(w, r)
	if !ok {
		return
	}
	body, ok := h.readBody(w, r, h.o.MaxEventBytes)
	if !ok {
		return
	}
	ev, err := event.Parse(body)
	if err != nil {
		h.s.answered(&ev, lvl, FailedFinal)
		h.writeAnswer(w, invalid(0, ev.ID, err))
		return
	}
	if errs := h.admit(r, []event.Event{ev}); errs != nil && errs[0] != nil {
		h.writeAnswer(w, refused(0, ev.ID, errs[0]))
		return
	}
	a := answerOf(h.s.Submit(r.Context(), []event.Event{ev}, lvl, wait)[0])
	h.s.answered(&ev, lvl, a.Status)
	h.writeAnswer(w, a)
}

// BatchAnswer is the JSON answer of POST /v1/events:batch.
type BatchAnswer struct {
	Results []Answer       `json:"results"`
	Counts  map[string]int `json:"counts"`
}

func (h *handler) postBatch(w http.ResponseWriter, r *http.Request) {
	lvl, wait, ok := h.params(w, r)
	if !ok {
		return
	}
	body, ok := h.readBody(w, r, h.o.MaxBatchBytes)
	if !ok {
		return
	}
	var (
		evs     []event.Event
		lines   []int
		answers []Answer
		events  int
	)
	for n, line := 1, body; len(line) > 0; n++ {
		var cur []byte
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			cur, line = line[:i], line[i+1:]
		} else {
			cur, line = line, nil
		}
		if len(bytes.TrimSpace(cur)) == 0 {
			continue
		}
		if events++; events > h.o.MaxBatchLines {
			writeJSON(w, http.StatusRequestEntityTooLarge, Answer{Status: FailedFinal,
				Error: fmt.Sprintf("batch of more than %d events (line %d): send at most %d per request", h.o.MaxBatchLines, n, h.o.MaxBatchLines)})
			return
		}
		if int64(len(cur)) > h.o.MaxEventBytes {
			h.s.answered(&event.Event{}, lvl, FailedFinal)
			answers = append(answers, invalid(n, "", fmt.Errorf("line %d: %d bytes, larger than the %d allowed for one event", n, len(cur), h.o.MaxEventBytes)))
			continue
		}
		ev, err := event.Parse(cur)
		if err != nil {
			h.s.answered(&ev, lvl, FailedFinal)
			answers = append(answers, invalid(n, ev.ID, fmt.Errorf("line %d: %w", n, err)))
			continue
		}
		evs = append(evs, ev)
		lines = append(lines, n)
	}
	if len(evs) == 0 && len(answers) == 0 {
		writeJSON(w, http.StatusBadRequest, Answer{Status: FailedFinal, Error: "empty batch: send one JSON event per line"})
		return
	}
	if errs := h.admit(r, evs); errs != nil {
		kept, keptLines := evs[:0:0], lines[:0:0]
		for i, err := range errs {
			if err != nil {
				answers = append(answers, refused(lines[i], evs[i].ID, err))
			} else {
				kept, keptLines = append(kept, evs[i]), append(keptLines, lines[i])
			}
		}
		evs, lines = kept, keptLines
	}
	for i, res := range h.s.Submit(r.Context(), evs, lvl, wait) {
		a := answerOf(res)
		a.Line = lines[i]
		h.s.answered(&evs[i], lvl, a.Status)
		answers = append(answers, a)
	}
	// In line order, as sent.
	sortAnswers(answers)
	for i := range answers {
		answers[i].sayDurability(h.s)
	}
	out := BatchAnswer{Results: answers, Counts: map[string]int{}}
	allRetryable, sameCode := true, true
	var retryAfter time.Duration
	for _, a := range answers {
		out.Counts[a.Status.String()]++
		allRetryable = allRetryable && a.Status == FailedRetryable
		sameCode = sameCode && a.code == answers[0].code
		retryAfter = max(retryAfter, a.retryAfter)
	}
	code := http.StatusOK
	if allRetryable {
		code = answers[0].code
		w.Header().Set("Retry-After", retryAfterHeader(retryAfter))
	}
	if len(evs) == 0 {
		// No line went in: every one invalid (400), or all refused alike.
		code = http.StatusBadRequest
		if sameCode {
			code = answers[0].code
		}
	}
	writeBody(w, code, out.appendJSON(make([]byte, 0, 64+96*len(out.Results))))
}

// appendJSON encodes the answer as encoding/json would (same fields, same order),
// without reflection: it is written once per event on the batch path.
func (ba *BatchAnswer) appendJSON(b []byte) []byte {
	b = append(b, `{"results":[`...)
	for i := range ba.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = ba.Results[i].appendJSON(b)
	}
	b = append(b, `],"counts":{`...)
	keys := make([]string, 0, len(ba.Counts))
	for k := range ba.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(ba.Counts[k]), 10)
	}
	return append(b, "}}\n"...)
}

func (a *Answer) appendJSON(b []byte) []byte {
	b = append(b, '{')
	sep := false
	field := func(name string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if a.Line != 0 {
		field("line")
		b = strconv.AppendInt(b, int64(a.Line), 10)
	}
	if a.EventID != "" {
		field("event_id")
		b = appendJSONString(b, a.EventID)
	}
	if a.Status != 0 {
		field("status")
		b = appendJSONString(b, a.Status.String())
	}
	if a.Duplicate {
		field("duplicate")
		b = append(b, "true"...)
	}
	if a.Seq != 0 {
		field("seq")
		b = strconv.AppendUint(b, a.Seq, 10)
	}
	if a.RecordLost {
		field("record_lost")
		b = append(b, "true"...)
	}
	if a.LostSeq != 0 {
		field("lost_seq")
		b = strconv.AppendUint(b, a.LostSeq, 10)
	}
	if a.Attempts != 0 {
		field("attempts")
		b = strconv.AppendInt(b, int64(a.Attempts), 10)
	}
	if a.PayloadHash != "" {
		field("payload_hash")
		b = appendJSONString(b, a.PayloadHash)
	}
	if a.Error != "" {
		field("error")
		b = appendJSONString(b, a.Error)
	}
	if a.Durability != "" {
		field("durability")
		b = appendJSONString(b, a.Durability)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string; plain ASCII directly, anything else
// through encoding/json (which also escapes <, > and & as it does elsewhere).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func sortAnswers(a []Answer) {
	// Insertion sort: invalid lines come first and are few.
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Line < a[j-1].Line; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// LostAnswer is GET /v1/events/{id}'s 410: the event's record was lost to a
// salvage of the damaged log, and its status document with it.
type LostAnswer struct {
	EventID string `json:"event_id"`
	Status  string `json:"status"` // LOST
	// LostSeq is the record's seq; where it is not known (a range recorded
	// before gale kept each id's seq), LostFrom..LostTo is the range.
	LostSeq  uint64 `json:"lost_seq,omitempty"`
	LostFrom uint64 `json:"lost_from_seq,omitempty"`
	LostTo   uint64 `json:"lost_to_seq,omitempty"`
	Error    string `json:"error"`
	See      string `json:"see"` // /v1/lost
}

func (h *handler) getEvent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := h.s.Status(id)
	var lost *LostError
	var unknown *UnknownLostError
	switch {
	case errors.As(err, &lost):
		a := LostAnswer{EventID: id, Status: "LOST", LostSeq: lost.Seq, See: "/v1/lost",
			Error: "the record of this event was lost: a salvage of the damaged log could not keep it; send it again (a resend is taken in as a new event)"}
		if lost.Seq == 0 {
			a.LostFrom, a.LostTo = lost.From, lost.To
		}
		writeJSON(w, http.StatusGone, a)
	case errors.As(err, &unknown):
		writeJSON(w, http.StatusNotFound, Answer{EventID: id, Error: fmt.Sprintf(
			"no event with this event_id (never persisted, or past the dedupe window); but a salvage of the damaged log lost %s whose event_id is unknown: it may be one of them (see /v1/lost)",
			plural(unknown.Seqs, "acknowledged seq", "acknowledged seqs"))})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, Answer{EventID: id, Error: "no event with this event_id (never persisted, or past the dedupe window)"})
	case err != nil:
		// The log failed or met corruption: retryable, perhaps on another replica.
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, Answer{EventID: id, Status: FailedRetryable, Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func (h *handler) postRetry(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(r.PathValue("id"), ":retry")
	if !ok {
		writeJSON(w, http.StatusNotFound, Answer{Error: "unknown action: POST /v1/events/{event_id}:retry is the only one"})
		return
	}
	st, err := h.s.Resubmit(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, Answer{EventID: id, Error: err.Error()})
	case errors.Is(err, eventlog.ErrFailed), errors.Is(err, ErrShuttingDown), errors.Is(err, eventlog.ErrOverloaded),
		errors.Is(err, event.ErrCorrupt):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, Answer{EventID: id, Status: FailedRetryable, Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusConflict, Answer{EventID: id, Status: st.Status, Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

func (h *handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10000 {
			writeJSON(w, http.StatusBadRequest, Answer{Error: fmt.Sprintf("limit=%q: want 1..10000", v)})
			return
		}
		limit = n
	}
	dl, err := h.s.DeadLetters(limit)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, Answer{Error: err.Error()})
		return
	}
	if dl == nil {
		dl = []DeadLetter{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": dl})
}

// lost lists the acknowledged seq ranges that a salvage of a damaged log could not
// keep, with the event ids some surviving copy named (and their seqs): their
// clients must send them again (what a resend does: docs/repair.md, on salvage).
func (h *handler) lost(w http.ResponseWriter, _ *http.Request) {
	lost := h.s.log.Lost()
	if lost == nil {
		lost = []eventlog.LostRange{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"lost": lost})
}

func (h *handler) ready(w http.ResponseWriter, _ *http.Request) {
	err := h.s.Ready()
	if err == nil && h.o.Ready != nil {
		err = h.o.Ready()
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeAnswer writes the answer of one event, saying what PERSISTED means here
// if it names a seq.
func (h *handler) writeAnswer(w http.ResponseWriter, a Answer) {
	a.sayDurability(h.s)
	writeAnswer(w, a)
}

// sayDurability sets the answer's Durability if it names a seq: the event is
// (or was) in the log, and the word says what that is worth. An answer without
// one (ACCEPTED, invalid, refused, not stored) has nothing it could qualify.
func (a *Answer) sayDurability(s *Service) {
	if a.Seq > 0 {
		a.Durability = s.Durability()
	}
}

func writeAnswer(w http.ResponseWriter, a Answer) {
	if a.code == http.StatusTooManyRequests || a.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterHeader(a.retryAfter))
	}
	writeJSON(w, a.code, a)
}

// retryAfterHeader is d in whole seconds, at least 1.
func retryAfterHeader(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	writeBody(w, code, append(b, '\n'))
}

// writeBody writes a JSON answer with its length, so clients need no chunking.
func writeBody(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// readAll reads a body, in one allocation when its length is announced.
func readAll(r io.Reader, n, limit int64) ([]byte, error) {
	// Allocate what was announced only up to 64 KiB: a client announcing 16 MiB and
	// sending one byte must not hold 16 MiB (the rest grows as it arrives).
	if n <= 0 || n > limit || n > 64<<10 {
		return io.ReadAll(r)
	}
	buf := make([]byte, n+1)
	m, err := io.ReadFull(r, buf)
	if err == io.ErrUnexpectedEOF && int64(m) == n {
		return buf[:m], nil // exactly the announced length
	}
	if err == io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("body ended after %d of the %d bytes announced", m, n)
	}
	if err != nil {
		return nil, err
	}
	// More than announced: read on, within the limit.
	rest, err := io.ReadAll(r)
	return append(buf, rest...), err
}
