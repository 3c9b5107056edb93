package builtin

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// The sources' and sinks' classes (docs/components.md, "Sources and sinks").
const (
	KafkaSpoutClass     = "gale.spout.Kafka"
	JetStreamSpoutClass = "gale.spout.JetStream"
	SQLSinkClass        = "gale.sink.SQL"
	KafkaSinkClass      = "gale.sink.Kafka"
	JetStreamSinkClass  = "gale.sink.JetStream"
	FileSinkClass       = "gale.sink.File"
	StdoutSinkClass     = "gale.sink.Stdout"
)

func ioComponents() []component.Declaration {
	return []component.Declaration{
		kafkaSpoutDecl(),
		jetStreamSpoutDecl(),
		sqlSinkDecl(),
		kafkaSinkDecl(),
		jetStreamSinkDecl(),
		fileSinkDecl(),
		stdoutSinkDecl(),
	}
}

// ioPropError is a *component.SpecError placed at property key, so that a Flux
// file's reader points at the property's line.
func ioPropError(key, format string, a ...any) error {
	return &component.SpecError{Arg: -1, Call: -1, Prop: key, Msg: fmt.Sprintf("property %q: ", key) + fmt.Sprintf(format, a...)}
}

// Secrets. A file given to gale submit or gale serve --nats travels to every
// worker through the cluster's KV, so a password must not be in it: a URL with one
// is given by reference, env:NAME (the variable in the process that runs the task)
// or @PATH (a mounted secret file), as gale serve --sink takes it (sink.ResolveURL).

// checkRef refuses a malformed reference: env: or @ naming nothing, or holding a URL
// where its name was meant (sink.ResolveURL says the same at runtime; here it is
// said at build). It never echoes what follows env: or @ when it holds a URL.
func checkRef(key, v string) error {
	switch {
	case !sink.IsRef(v):
		return nil
	case strings.Contains(v, "://"):
		return ioPropError(key, "a reference (env:NAME or @PATH) holds a URL: give the variable's name or the secret file's path, not the URL itself")
	case v == "env:":
		return ioPropError(key, "env: names no environment variable (want env:NAME)")
	case v == "@":
		return ioPropError(key, "@ names no file (want @PATH)")
	}
	return nil
}

// databaseURL reads property key, a database URL: a reference, or a URL (or SQLite
// path) without a password.
func databaseURL(s component.Spec, key string) (string, error) {
	v, err := s.String(key, "")
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", ioPropError(key, "empty: want the database URL, or env:NAME / @PATH naming it")
	}
	if err := checkRef(key, v); err != nil {
		return "", err
	}
	if sink.HoldsSecret(v) {
		return "", ioPropError(key, "the database URL holds a password, which would travel in clear with the file: give it by reference, env:NAME or @PATH")
	}
	return v, nil
}

// checkNATSURL refuses a NATS URL list that holds credentials (a user and password,
// or a token: any user info), unless it is a reference.
func checkNATSURL(v string) error {
	if sink.IsRef(v) {
		return nil
	}
	if v == "" {
		return fmt.Errorf("empty NATS URL: want nats://HOST:PORT, or env:NAME / @PATH naming it")
	}
	for _, u := range strings.Split(v, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		p, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("a NATS URL that does not parse (not echoed: it may hold credentials)")
		}
		if p.User != nil {
			return fmt.Errorf("the NATS URL holds credentials (user info %s@), which would travel in clear with the file: give it by reference, env:NAME or @PATH", "xxxxx")
		}
	}
	return nil
}

// natsURL reads property key, a NATS URL (list) checked by checkNATSURL.
func natsURL(s component.Spec, key string) (string, error) {
	v, err := s.String(key, "")
	if err != nil {
		return "", err
	}
	if err := checkRef(key, v); err != nil {
		return "", err
	}
	if err := checkNATSURL(v); err != nil {
		return "", ioPropError(key, "%v", err)
	}
	return v, nil
}

// redactNATS is a NATS URL list for an error: without any user info (a user-only
// one is a token, which url.Redacted would leave; a user name goes with its
// password), each URL as nats.Connect reads it (nats:// when it names no scheme).
func redactNATS(v string) string {
	parts := strings.Split(v, ",")
	for i, u := range parts {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		if p, err := url.Parse(u); err == nil {
			p.User = nil
			parts[i] = p.String()
		} else {
			parts[i] = "(unparsable URL)"
		}
	}
	return strings.Join(parts, ",")
}

// ioTopologyConfig is the topology config a class needs to size itself against
// (message timeout, max spout pending, ackers): topology.DefaultConfig with the
// Storm keys of the file's config: section applied, as the file's reader applies
// them to the run (their values were checked there, at their lines).
func ioTopologyConfig(s component.Spec) topology.Config {
	c := topology.DefaultConfig()
	num := func(v any) (int, bool) {
		switch n := v.(type) {
		case int:
			return n, true
		case float64:
			return int(n), n == float64(int(n))
		}
		return 0, false
	}
	for k, v := range s.Config {
		switch k {
		case "topology.acker.executors":
			if n, ok := num(v); ok {
				c.Ackers = n
			}
		case "topology.max.spout.pending":
			if v == nil {
				c.MaxSpoutPending = 0
			} else if n, ok := num(v); ok {
				c.MaxSpoutPending = n
			}
		case "topology.message.timeout.secs":
			if n, ok := num(v); ok {
				c.MessageTimeout = time.Duration(n) * time.Second
			}
		case "topology.enable.message.timeouts":
			if b, ok := v.(bool); ok {
				c.DisableTimeouts = !b
			}
		}
	}
	return c
}

// ioDurations reads a pair of duration properties (a backoff's first and last), each
// defaulting to its def.
func ioDurations(s component.Spec, k1 string, d1 time.Duration, k2 string, d2 time.Duration) (time.Duration, time.Duration, error) {
	a, err := s.Duration(k1, d1)
	if err != nil {
		return 0, 0, err
	}
	b, err := s.Duration(k2, d2)
	if err != nil {
		return 0, 0, err
	}
	return a, b, nil
}

// ioOptionError places an error of a connector's option check (NewSource, NewSink)
// at the property it came from.
func ioOptionError(key string, err error) error {
	return ioPropError(key, "%v", err)
}

// ioCheckInputs refuses, when a sink's task starts, an input stream of its
// component that lacks a field the sink writes: each of its tuples would be
// failed, and replayed for ever by a spout without a dead letter (a files spout,
// a Kafka spout without deadLetterTopic). tc.Topology nil (outside the engine):
// nothing to check.
func ioCheckInputs(tc topology.TaskContext, class, what string, need []string) error {
	if tc.Topology == nil || len(need) == 0 {
		return nil
	}
	c := tc.Topology.Component(tc.Component)
	if c == nil {
		return nil
	}
	for _, in := range c.Inputs {
		src := tc.Topology.Component(in.Component)
		if src == nil || src.Streams[in.Stream] == nil {
			continue
		}
		f := src.Streams[in.Stream].Source.Fields
		for _, n := range need {
			if !f.Contains(n) {
				return fmt.Errorf("%s %s: %s %q is no field of stream %q of %s (its fields %v): each of its tuples would be failed and replayed",
					class, tc.Component, what, n, in.Stream, in.Component, f)
			}
		}
	}
	return nil
}
