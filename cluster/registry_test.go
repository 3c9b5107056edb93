package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	var r Registry
	topo, cfg := shape(t, "")
	f := func(ctx context.Context, env Env) (*Deployment, error) {
		if len(env.Args) > 0 {
			return nil, errors.New("unknown flag " + env.Args[0])
		}
		return &Deployment{Topology: topo, Config: cfg}, nil
	}
	if err := r.Register("wc", f); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("wc", f); err == nil || !strings.Contains(err.Error(), `topology "wc" registered twice`) {
		t.Errorf("second Register: %v", err)
	}
	if err := r.Register("a.b", f); !errors.Is(err, ErrConfig) {
		t.Errorf("a name with a dot: %v", err)
	}
	if err := r.Register("x", nil); !errors.Is(err, ErrConfig) {
		t.Errorf("a nil factory: %v", err)
	}
	if err := r.Register("nil", func(context.Context, Env) (*Deployment, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := r.Build(ctx, Env{Topology: "wc"})
	if err != nil || d.Topology != topo {
		t.Fatalf("Build: %v %v", d, err)
	}
	_, err = r.Build(ctx, Env{Topology: "orders"})
	if !errors.Is(err, ErrUnknownTopology) || !strings.Contains(err.Error(), `"orders" (this build has: [nil wc])`) {
		t.Errorf("unknown topology: %v", err)
	}
	if _, err = r.Build(ctx, Env{Topology: "wc", Args: []string{"--bad"}}); err == nil || err.Error() != `topology "wc": unknown flag --bad` {
		t.Errorf("bad args: %v", err)
	}
	if _, err = r.Build(ctx, Env{Topology: "nil"}); !errors.Is(err, ErrConfig) {
		t.Errorf("a factory returning nothing: %v", err)
	}
}
