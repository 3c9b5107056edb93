package tuple

import (
	"fmt"
	"strings"
)

// Fields names the values of the tuples on one stream, in order (Storm's Fields).
// A Fields value is immutable once made; share it between streams freely.
type Fields struct {
	names []string
}

// NewFields returns the field list names. Names must be non-empty and distinct; misuse
// is reported by Validate, which the topology builder calls.
func NewFields(names ...string) *Fields {
	return &Fields{names: append([]string(nil), names...)}
}

// Validate reports an empty or duplicated field name.
func (f *Fields) Validate() error {
	seen := make(map[string]bool, len(f.names))
	for i, n := range f.names {
		if n == "" {
			return fmt.Errorf("field %d has an empty name", i)
		}
		if seen[n] {
			return fmt.Errorf("field %q is declared twice", n)
		}
		seen[n] = true
	}
	return nil
}

// Len is the number of fields.
func (f *Fields) Len() int {
	if f == nil {
		return 0
	}
	return len(f.names)
}

// Names returns a copy of the field names.
func (f *Fields) Names() []string { return append([]string(nil), f.names...) }

// Index returns the position of name, or -1 if the stream has no such field. Field
// lists are short, so a linear scan beats a map here.
func (f *Fields) Index(name string) int {
	if f == nil {
		return -1
	}
	for i, n := range f.names {
		if n == name {
			return i
		}
	}
	return -1
}

// Contains reports whether name is one of the fields.
func (f *Fields) Contains(name string) bool { return f.Index(name) >= 0 }

func (f *Fields) String() string { return "[" + strings.Join(f.names, ", ") + "]" }

// Values is the ordered list of values of one tuple. The runtime does not copy it: do
// not modify a Values after emitting it (all-grouping shares it between receivers).
type Values []any
