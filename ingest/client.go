package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gale-stream/gale/event"
)

// Client calls a gale serve API. The zero HTTP uses http.DefaultClient.
type Client struct {
	URL  string // base URL, e.g. http://127.0.0.1:8080
	HTTP *http.Client
	// Token, if set, is sent as Authorization: Bearer (a token of the server's
	// --tokens file with the scopes the calls need: write:SOURCE, read).
	Token string
}

func (c *Client) authorize(req *http.Request) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Send posts evs as one NDJSON batch at level (0: the server's default per source),
// waiting at most wait for ack=processed (0: the server's default). It returns one
// Answer per event, in order, and the HTTP status. An error means no per-event
// answer came back (transport failure, answers that do not match the lines sent:
// ErrProtocol, or the whole batch refused: then each answer is FAILED_RETRYABLE or
// FAILED_FINAL with the server's reason).
func (c *Client) Send(ctx context.Context, evs []event.Event, level Level, wait time.Duration) ([]Answer, int, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for i := range evs {
		if err := enc.Encode(&evs[i]); err != nil {
			return nil, 0, fmt.Errorf("ingest client: encode %q: %w", evs[i].ID, err)
		}
	}
	q := url.Values{}
	if level != 0 {
		q.Set("ack", level.String())
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/v1/events:batch?"+q.Encode(), &body)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	c.authorize(req)
	// The batch is idempotent (event ids), and saying so lets net/http resend it on
	// a fresh connection when a kept-alive one was closed under it (a server
	// shutting down closes idle connections as a request may be on its way).
	if len(evs) > 0 {
		req.Header.Set("Idempotency-Key", evs[0].ID)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("ingest client: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("ingest client: reading the answer: %w", err)
	}
	var ba BatchAnswer
	if err := json.Unmarshal(b, &ba); err == nil && ba.Results != nil {
		if err := checkLines(evs, ba.Results); err != nil {
			return nil, resp.StatusCode, fmt.Errorf("ingest client: HTTP %d: %w", resp.StatusCode, err)
		}
		return ba.Results, resp.StatusCode, nil
	}
	// The whole batch was refused (413, 503 while shutting down...): one answer.
	var a Answer
	if json.Unmarshal(b, &a) != nil || a.Status == 0 {
		return nil, resp.StatusCode, fmt.Errorf("ingest client: HTTP %d: %.300s", resp.StatusCode, b)
	}
	out := make([]Answer, len(evs))
	for i := range out {
		out[i] = a
		out[i].EventID, out[i].Line = evs[i].ID, i+1
	}
	refusal := &BatchRefusedError{Code: resp.StatusCode, Answer: a}
	if resp.Header.Get("Retry-After") != "" {
		refusal.RetryAfter = RetryAfter(resp.Header)
	}
	return out, resp.StatusCode, refusal
}

// BatchRefusedError is Send's error when the server answered a batch as a whole,
// with one answer rather than one per line: a 413 (too large), a 400 (a bad query,
// a line it names), 429 or 503 (later), 401 or 403 (the token). Send copies that
// one answer to every event, but it is no event's own: Client.SendAll splits,
// resends or stops on it.
type BatchRefusedError struct {
	Code   int    // the HTTP status
	Answer Answer // the one answer: its Status and Error
	// RetryAfter is the answer's Retry-After header (0: none).
	RetryAfter time.Duration
}

func (e *BatchRefusedError) Error() string {
	return fmt.Sprintf("ingest client: batch refused: HTTP %d: %s", e.Code, e.Answer.Error)
}

// ErrProtocol is wrapped by Send's error when a batch's answers break the API's
// promise (one answer per line, in line order, each naming the event_id sent on
// its line, with a status): Send then returns no answers, since none can be
// trusted to be its event's, and SendAll sends the request again.
var ErrProtocol = errors.New("protocol violation")

// checkLines checks the batch answers as of evs, in order: as many, each for its
// line and event. A FAILED_FINAL answer naming no event_id is its line's event's
// (the server could not read the line's id: a line too large for one event); its
// EventID is set.
func checkLines(evs []event.Event, answers []Answer) error {
	if len(answers) != len(evs) {
		return fmt.Errorf("%w: %d answers for a batch of %d events", ErrProtocol, len(answers), len(evs))
	}
	for i := range answers {
		a := &answers[i]
		switch {
		case a.Line != 0 && a.Line != i+1:
			return fmt.Errorf("%w: answer %d is for line %d (event_id %q)", ErrProtocol, i+1, a.Line, a.EventID)
		case a.Status < Accepted || a.Status > FailedFinal:
			return fmt.Errorf("%w: line %d (event_id %q) answered with no status", ErrProtocol, i+1, a.EventID)
		case a.EventID == "" && a.Status == FailedFinal:
			a.EventID = evs[i].ID
		case a.EventID != evs[i].ID:
			return fmt.Errorf("%w: line %d answered for event_id %q; the event sent on it is %q", ErrProtocol, i+1, a.EventID, evs[i].ID)
		}
	}
	return nil
}

// Status gets an event's status; found is false on 404.
func (c *Client) Status(ctx context.Context, id string) (st EventStatus, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/v1/events/"+url.PathEscape(id), nil)
	if err != nil {
		return st, false, err
	}
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return st, false, fmt.Errorf("ingest client: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(b, &st); err != nil {
			return st, false, fmt.Errorf("ingest client: status of %q: %w", id, err)
		}
		return st, true, nil
	case http.StatusNotFound:
		return st, false, nil
	}
	return st, false, fmt.Errorf("ingest client: status of %q: HTTP %d: %.200s", id, resp.StatusCode, b)
}

// RetryAfter parses a Retry-After header in seconds (default 1s).
func RetryAfter(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Second
}
