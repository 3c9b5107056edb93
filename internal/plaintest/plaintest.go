// Package plaintest checks, in tests, that a topology's tuples carry only plain
// values: the types the tuple codec encodes without registration, so that the
// topology can run across processes unchanged (issue 11).
//
// Plain values are nil, bool, string, []byte, int, int8, int16, int32, int64, uint,
// uint8, uint16, uint32, uint64, float32, float64, time.Time, and unnamed slices and
// string-keyed maps of plain values, nested. A named type (orders.Flags is a uint8,
// json.RawMessage a []byte), a pointer or a struct other than time.Time is not plain.
package plaintest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

var scalars = map[reflect.Type]bool{}

func init() {
	for _, v := range []any{false, "", 0, int8(0), int16(0), int32(0), int64(0), uint(0), uint8(0),
		uint16(0), uint32(0), uint64(0), float32(0), float64(0), time.Time{}} {
		scalars[reflect.TypeOf(v)] = true
	}
}

var anyType = reflect.TypeFor[any]()

// PlainValue returns nil if v is plain (see the package doc), else an error naming the
// first value that is not, and where it is inside v.
func PlainValue(v any) error {
	if v == nil {
		return nil
	}
	return plain(reflect.ValueOf(v), "")
}

func plain(v reflect.Value, at string) error {
	t := v.Type()
	if t == anyType { // an element of []any or map[string]any
		if v.IsNil() {
			return nil
		}
		return plain(v.Elem(), at)
	}
	if err := plainType(t, at); err != nil {
		return err
	}
	if elem := t.Kind(); elem == reflect.Slice && t.Elem() == anyType {
		for i := 0; i < v.Len(); i++ {
			if err := plain(v.Index(i), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	} else if elem == reflect.Map && t.Elem() == anyType {
		it := v.MapRange()
		for it.Next() {
			if err := plain(it.Value(), fmt.Sprintf("%s[%q]", at, it.Key().String())); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainType checks a static type: a scalar, or an unnamed slice or string-keyed map
// whose elements are plain (any: checked per element by plain).
func plainType(t reflect.Type, at string) error {
	switch {
	case scalars[t], t == anyType:
		return nil
	case t.Name() == "" && t.Kind() == reflect.Slice:
		return plainType(t.Elem(), at+"[]")
	case t.Name() == "" && t.Kind() == reflect.Map:
		if t.Key() != reflect.TypeFor[string]() {
			return fmt.Errorf("%s: %v: map keys are not string", where(at), t)
		}
		return plainType(t.Elem(), at+"[key]")
	}
	return fmt.Errorf("%s: %v is not a codec built-in type", where(at), t)
}

func where(at string) string {
	if at == "" {
		return "value"
	}
	return "value" + at
}

// Report collects what Tap saw. Safe for concurrent use.
type Report struct {
	mu     sync.Mutex
	tuples int
	bad    map[string]int // problem → tuples with it
}

// Err returns an error listing every kind of non-plain value seen (source component,
// stream, field and type), or nil if every value was plain. It also fails if no
// tuple was seen at all, so a tap that was never installed does not pass silently.
func (r *Report) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tuples == 0 {
		return fmt.Errorf("plaintest: no tuple was checked")
	}
	if len(r.bad) == 0 {
		return nil
	}
	var lines []string
	for p, n := range r.bad {
		lines = append(lines, fmt.Sprintf("%s (%d tuples)", p, n))
	}
	sort.Strings(lines)
	return fmt.Errorf("plaintest: of %d tuples checked, some carry values that are not plain:\n\t%s", r.tuples, strings.Join(lines, "\n\t"))
}

// Tuples is the number of tuples checked.
func (r *Report) Tuples() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tuples
}

// Check checks every value of t, recording the problems under its source component,
// stream and field names.
func (r *Report) Check(t *tuple.Tuple) {
	var probs []string
	for i, v := range t.Values() {
		if err := PlainValue(v); err != nil {
			name := fmt.Sprint(i)
			if f := t.Fields(); f != nil && i < f.Len() {
				name = f.Names()[i]
			}
			probs = append(probs, fmt.Sprintf("%s/%s field %q: %v", t.SourceComponent(), t.SourceStream(), name, err))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tuples++
	if r.bad == nil {
		r.bad = map[string]int{}
	}
	for _, p := range probs {
		r.bad[p]++
	}
}

// Tap makes every bolt of topo check each tuple it receives (ticks included) before
// executing it, into the returned Report. Every stream of a topology whose streams
// all have a consumer is thus checked, each value as the consumer gets it. Call it
// after Build and before engine.Start. Bolts keep the optional interfaces the runtime
// looks for (topology.Drainer).
func Tap(topo *topology.Topology) *Report {
	r := &Report{}
	for _, c := range topo.Components {
		switch {
		case c.Bolt != nil:
			inner := c.Bolt
			c.Bolt = func() topology.Bolt {
				b := inner()
				if d, ok := b.(drainBolt); ok {
					return &tappedDrainer{tappedBolt{Bolt: d, r: r}, d}
				}
				return &tappedBolt{Bolt: b, r: r}
			}
		case c.Basic != nil:
			inner := c.Basic
			c.Basic = func() topology.BasicBolt { return &tappedBasic{BasicBolt: inner(), r: r} }
		}
	}
	return r
}

type drainBolt interface {
	topology.Bolt
	topology.Drainer
}

type tappedBolt struct {
	topology.Bolt
	r *Report
}

func (b *tappedBolt) Execute(t *tuple.Tuple) {
	b.r.Check(t)
	b.Bolt.Execute(t)
}

type tappedDrainer struct {
	tappedBolt
	d topology.Drainer
}

func (b *tappedDrainer) Drain() { b.d.Drain() }

type tappedBasic struct {
	topology.BasicBolt
	r *Report
}

func (b *tappedBasic) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	b.r.Check(t)
	return b.BasicBolt.Execute(t, out)
}
