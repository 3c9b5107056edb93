// Package access decides who may use gale serve's HTTP API, from where, and how much.
//
// # The model
//
// A token is a secret sent as "Authorization: Bearer TOKEN". The server keeps only
// its SHA-256 (a tokens file may hold the digest, "sha256:<hex>", so the file itself
// gives nothing away) and compares digests in constant time with crypto/subtle,
// against every token it knows, so neither the answer's time nor its path says which
// token came close. Tokens are never logged: logs and errors name a token by where it
// was defined ("tokens.txt:3", "--ui-token").
//
// A token holds scopes; each route needs one:
//
//	write:SOURCE  POST /v1/events and /v1/events:batch, for events of that source
//	write:*       the same, for every source
//	read          GET /v1/events/{id}, GET /v1/lost
//	admin         POST /v1/events/{id}:retry, GET /v1/dead-letters
//	ui            /ui/ (its API; the page's own files load without) and /metrics
//
// Any other path needs a valid token of any scope; /healthz and /readyz are open to
// probes. While no token is configured every route is open, which gale serve allows
// only on a loopback address (or with --insecure-no-auth).
//
// The write check is per event: the route needs some write scope (else 403 for the
// whole request), and Guard.Admit then refuses, one by one, the events whose source
// the token does not hold (403 FAILED_FINAL naming the source), so the good lines of
// a batch still go in, as with invalid lines.
//
// # Cross-site requests
//
// A browser page on any site can send a "simple" POST (text/plain, no preflight) to a
// loopback listener. Guard refuses: a POST whose Content-Type is not
// application/json or application/x-ndjson (415: a browser cannot send those cross
// site without a CORS preflight); a request whose Origin is neither the server's own
// nor in --allow-origin (403); and a Host the server does not answer to (403, against
// DNS rebinding: a page whose name resolves to 127.0.0.1 still sends its own name).
//
// # Rate
//
// With a rate set, writes are limited in events per second (a token bucket,
// golang.org/x/time/rate) per token, or per source while no token is configured;
// events past the bucket are answered 429 FAILED_RETRYABLE with Retry-After, each on
// its own line in a batch.
//
// Every refusal is counted by reason in gale_http_refusals_total.
package access
