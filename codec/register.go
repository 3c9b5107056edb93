package codec

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
)

// ErrRegister is wrapped by every error of Register.
var ErrRegister = errors.New("codec: cannot register")

// userType is a registered type.
type userType struct {
	name string
	typ  reflect.Type // as registered: T or *T
	elem reflect.Type // T
	ptr  bool         // registered as *T: decodes to a pointer
}

type registry struct {
	byName map[string]*userType
	byType map[reflect.Type]*userType
}

var (
	regMu sync.Mutex
	reg   atomic.Pointer[registry]
)

func init() {
	reg.Store(&registry{byName: map[string]*userType{}, byType: map[reflect.Type]*userType{}})
}

var (
	typMarshaler   = reflect.TypeFor[encoding.BinaryMarshaler]()
	typUnmarshaler = reflect.TypeFor[encoding.BinaryUnmarshaler]()
)

// Register makes a user type encodable under name, the same in every process of a
// topology (register in an init func, before any tuple is sent). sample is a value of
// the type, either T or *T, and *T must implement encoding.BinaryMarshaler and
// encoding.BinaryUnmarshaler. A value registered as T decodes to a T, one registered
// as *T to a *T (a nil *T stays nil). Registering a name or a type twice is an error,
// and so is a built-in type (it needs no registration).
func Register(name string, sample any) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w %q: a name must have 1 to %d bytes", ErrRegister, name, maxNameLen)
	}
	if sample == nil {
		return fmt.Errorf("%w %q: nil sample", ErrRegister, name)
	}
	t := reflect.TypeOf(sample)
	ut := &userType{name: name, typ: t, elem: t}
	if t.Kind() == reflect.Pointer {
		ut.ptr, ut.elem = true, t.Elem()
	}
	if _, ok := scalarTags[t]; ok || t == typAny {
		return fmt.Errorf("%w %q: %v is built in", ErrRegister, name, t)
	}
	pt := reflect.PointerTo(ut.elem)
	if !pt.Implements(typMarshaler) || !pt.Implements(typUnmarshaler) {
		return fmt.Errorf("%w %q: %v does not implement encoding.BinaryMarshaler and encoding.BinaryUnmarshaler", ErrRegister, name, pt)
	}
	regMu.Lock()
	defer regMu.Unlock()
	old := reg.Load()
	if prev := old.byName[name]; prev != nil {
		return fmt.Errorf("%w %q: the name is taken by %v", ErrRegister, name, prev.typ)
	}
	if prev := old.byType[t]; prev != nil {
		return fmt.Errorf("%w %q: %v is registered as %q", ErrRegister, name, t, prev.name)
	}
	next := &registry{byName: make(map[string]*userType, len(old.byName)+1), byType: make(map[reflect.Type]*userType, len(old.byType)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	for k, v := range old.byType {
		next.byType[k] = v
	}
	next.byName[name], next.byType[t] = ut, ut
	reg.Store(next)
	return nil
}

func registered(t reflect.Type) *userType {
	r := reg.Load()
	if len(r.byType) == 0 {
		return nil
	}
	return r.byType[t]
}

func registeredName(name []byte) *userType { return reg.Load().byName[string(name)] }

// marshal appends the payload of rv (of the registered type).
func (ut *userType) marshal(dst []byte, rv reflect.Value) ([]byte, error) {
	var m encoding.BinaryMarshaler
	if ut.ptr {
		if rv.IsNil() {
			return append(dst, 0), nil
		}
		m = rv.Interface().(encoding.BinaryMarshaler)
	} else {
		p := reflect.New(ut.elem)
		p.Elem().Set(rv)
		m = p.Interface().(encoding.BinaryMarshaler)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		ue := unencodable(ut.typ, "its MarshalBinary failed")
		ue.Err = err
		return dst, ue
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...), nil
}

// unmarshal decodes a payload of the registered type.
func (ut *userType) unmarshal(d *decoder) (reflect.Value, error) {
	n, err := d.optLength(1)
	if err != nil {
		return reflect.Value{}, err
	}
	if n < 0 {
		if !ut.ptr {
			return reflect.Value{}, corrupt("nil value of registered type %q (not a pointer)", ut.name)
		}
		return reflect.Zero(ut.typ), nil
	}
	if err := d.spend(n + int(ut.elem.Size()) + 16); err != nil {
		return reflect.Value{}, err
	}
	p := reflect.New(ut.elem)
	if err := p.Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary(d.rawBytes(n)); err != nil {
		return reflect.Value{}, fmt.Errorf("codec: decoding registered type %q: %w", ut.name, err)
	}
	if ut.ptr {
		return p, nil
	}
	return p.Elem(), nil
}
