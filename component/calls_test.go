package component_test

import (
	"errors"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// endpoint is what a Value class makes: a components: entry's value.
type endpoint struct {
	host string
	port int
}

// TestValuesAndCalls: a Value class is made by Make (not Add), its value reaches a
// bolt's maker through ArgOf and PropOf, configMethods are read with Method, and each
// refusal is a *SpecError placed where a file's reader can point.
func TestValuesAndCalls(t *testing.T) {
	var r component.Registry
	var gotHosts []string
	var gotTimes []int
	for _, d := range []component.Declaration{{
		Class: "t.Endpoint",
		Value: func(s component.Spec) (any, error) {
			h, err := s.ArgString(0)
			if err != nil {
				return nil, err
			}
			p, err := s.Int("port", 80)
			return endpoint{h, p}, err
		},
	}, {
		Class:   "t.Client",
		Methods: []string{"withRetry", "withHost"},
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			e, err := component.ArgOf[endpoint](s, 0)
			if err != nil {
				return nil, err
			}
			gotHosts = append(gotHosts, e.host)
			if _, err := component.PropOf(s, "backup", endpoint{}); err != nil {
				return nil, err
			}
			for _, c := range s.Method("withRetry") {
				n, err := c.ArgInt(0)
				if err != nil {
					return nil, err
				}
				gotTimes = append(gotTimes, n)
			}
			for _, c := range s.Method("withHost") {
				if _, err := component.ArgOf[endpoint](c, 0); err != nil {
					return nil, err
				}
			}
			return boltMaker(s)
		},
	}} {
		if err := r.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	v, err := r.Make("ep", "t.Endpoint", component.Spec{Args: []any{"db"}, Properties: map[string]any{"port": 5432}})
	if err != nil || v != (endpoint{"db", 5432}) {
		t.Fatalf("Make: %v, %v", v, err)
	}
	b := topology.NewBuilder()
	good := component.Spec{Args: []any{v}, Properties: map[string]any{"backup": v},
		Calls: []component.Call{{Name: "withRetry", Args: []any{3}}, {Name: "withHost", Args: []any{v}}, {Name: "withRetry", Args: []any{5}}}}
	if _, err := r.Add(b, "c", "t.Client", good, 1); err != nil {
		t.Fatal(err)
	}
	if len(gotHosts) != 1 || gotHosts[0] != "db" || len(gotTimes) != 2 || gotTimes[0] != 3 || gotTimes[1] != 5 {
		t.Errorf("the maker got hosts %v and retries %v", gotHosts, gotTimes)
	}

	for _, tc := range []struct {
		name      string
		id, class string
		spec      component.Spec
		want      string
		arg, call int
		prop      string
		make      bool
	}{
		{"value class in Add", "c", "t.Endpoint", component.Spec{}, `component "c" (class "t.Endpoint"): a value class (a components: entry, used by ref), not a spout or bolt`, 0, 0, "", false},
		{"bolt class in Make", "c", "t.Client", component.Spec{}, `component "c" (class "t.Client"): a bolt class, not a value class: a components: entry needs a class that declares Value`, 0, 0, "", true},
		{"unknown method", "c", "t.Client", component.Spec{Args: []any{v}, Calls: []component.Call{{Name: "withRetries"}}},
			`component "c" (class "t.Client"): invalid spec: configMethods[0]: the class has no method "withRetries"; did you mean "withRetry"? (it declares withRetry, withHost)`, -1, 0, "", false},
		{"method on a class without", "e", "t.Endpoint", component.Spec{Args: []any{"x"}, Calls: []component.Call{{Name: "open"}}},
			`component "e" (class "t.Endpoint"): invalid spec: configMethods[0]: the class has no method "open" (it declares no configMethods)`, -1, 0, "", true},
		{"mistyped call argument", "c", "t.Client", component.Spec{Args: []any{v}, Calls: []component.Call{{Name: "withHost", Args: []any{v}}, {Name: "withRetry", Args: []any{"3"}}}},
			`component "c" (class "t.Client"): invalid spec: configMethods[1] (withRetry) args[0]: want an integer, got string "3"`, 0, 1, "", false},
		{"unread call argument", "c", "t.Client", component.Spec{Args: []any{v}, Calls: []component.Call{{Name: "withRetry", Args: []any{3, 4}}}},
			`component "c" (class "t.Client"): invalid spec: configMethods[0] (withRetry) args[1] (integer 4) is not used: the class read 1 of 2`, 1, 0, "", false},
		{"mistyped ref", "c", "t.Client", component.Spec{Args: []any{"db"}},
			`component "c" (class "t.Client"): invalid spec: constructorArgs[0]: want a component_test.endpoint, got string "db"`, 0, -1, "", false},
		{"mistyped property ref", "c", "t.Client", component.Spec{Args: []any{v}, Properties: map[string]any{"backup": 1}},
			`component "c" (class "t.Client"): invalid spec: property "backup": want a component_test.endpoint, got integer 1`, -1, -1, "backup", false},
		{"missing value argument", "e", "t.Endpoint", component.Spec{},
			`component "e" (class "t.Endpoint"): invalid spec: constructorArgs[0] is missing: the class takes at least 1, the file gives 0`, 0, -1, "", true},
		{"unread value property", "e", "t.Endpoint", component.Spec{Args: []any{"x"}, Properties: map[string]any{"prot": 1}},
			`component "e" (class "t.Endpoint"): invalid spec: property "prot" is not used; did you mean "port"? (the class reads port)`, -1, -1, "prot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.make {
				_, err = r.Make(tc.id, tc.class, tc.spec)
			} else {
				_, err = r.Add(topology.NewBuilder(), tc.id, tc.class, tc.spec, 1)
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			var se *component.SpecError
			if errors.As(err, &se) != errors.Is(err, component.ErrSpec) {
				t.Fatalf("SpecError %v but ErrSpec %v", errors.As(err, &se), errors.Is(err, component.ErrSpec))
			}
			if se != nil && (se.Arg != tc.arg || se.Call != tc.call || se.Prop != tc.prop) {
				t.Errorf("placed at arg %d call %d prop %q, want %d %d %q", se.Arg, se.Call, se.Prop, tc.arg, tc.call, tc.prop)
			}
		})
	}
}
