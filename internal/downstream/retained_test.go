package downstream

import (
	"reflect"
	"strings"
	"unsafe"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// retainedBytes measures what one session keeps for its client: a walk of
// the session's state through every pointer, slice, map and string it
// reaches, each counted once (strings by their bytes, maps by their entries
// plus Go's bucket overhead). It leaves out what is not the client's: the
// Server, resources and change sets (the origin's, shared by every client),
// the access policy, loggers, gRPC's stream, the session's channels and
// timer, and other sessions (the streams of the same node are chained
// through session.sameNode; another's writer changes its state without
// this one's lock). Called
// with ss.mu held.
func retainedBytes(ss *session) int64 {
	w := sizeWalk{seen: make(map[uintptr]bool)}
	return w.value(reflect.ValueOf(ss).Elem())
}

// mapEntryOverhead approximates a Go map's per-entry cost beyond the key
// and value: its tophash byte and the slack of buckets at load factor 6.5
// of 8 (Go 1.24's swiss tables are alike: 7/8 full groups, a control byte).
const mapEntryOverhead = 8

// notTheClients are the types a session refers to that it does not keep
// for its client.
var notTheClients = map[reflect.Type]bool{
	reflect.TypeOf(&Server{}):          true,
	reflect.TypeOf(&session{}):         true,
	reflect.TypeOf(&cache.Resource{}):  true,
	reflect.TypeOf(&cache.ChangeSet{}): true,
	reflect.TypeOf(&access.Policy{}):   true,
	reflect.TypeOf(&zap.Logger{}):      true,
	reflect.TypeOf(zap.Field{}):        true,
	reflect.TypeFor[statusWriter]():    true,
}

type sizeWalk struct{ seen map[uintptr]bool }

// value returns the bytes v reaches beyond its own (inline) size, plus
// its own size; callers count a value's inline size once.
func (w *sizeWalk) value(v reflect.Value) int64 {
	return int64(v.Type().Size()) + w.reached(v)
}

// reached returns the bytes v refers to, not counting v itself.
func (w *sizeWalk) reached(v reflect.Value) int64 {
	t := v.Type()
	if notTheClients[t] || strings.HasPrefix(t.PkgPath(), "google.golang.org/protobuf/internal") {
		return 0 // shared with others, or a message's runtime type info
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || w.once(v.Pointer()) {
			return 0
		}
		return w.value(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer {
			return w.reached(e)
		}
		return w.value(e)
	case reflect.String:
		if v.Len() == 0 || w.once(uintptr(unsafe.Pointer(unsafe.StringData(v.String())))) {
			return 0
		}
		return int64(v.Len())
	case reflect.Slice:
		if v.IsNil() || w.once(v.Pointer()) {
			return 0
		}
		return int64(v.Cap())*int64(t.Elem().Size()) + w.elems(v)
	case reflect.Array:
		return w.elems(v)
	case reflect.Map:
		if v.IsNil() || w.once(v.Pointer()) {
			return 0
		}
		n := int64(48) // the map header
		it := v.MapRange()
		for it.Next() {
			n += int64(t.Key().Size()+t.Elem().Size()) + mapEntryOverhead
			n += w.reached(it.Key()) + w.reached(it.Value())
		}
		return n
	case reflect.Struct:
		var n int64
		for i := range v.NumField() {
			n += w.reached(v.Field(i))
		}
		return n
	}
	return 0 // numbers, bools, funcs, channels, unsafe pointers: inline or not the client's
}

// elems returns the bytes the elements of slice or array v refer to.
func (w *sizeWalk) elems(v reflect.Value) int64 {
	var n int64
	for i := range v.Len() {
		n += w.reached(v.Index(i))
	}
	return n
}

// once reports whether p was counted already, and marks it.
func (w *sizeWalk) once(p uintptr) bool {
	if w.seen[p] {
		return true
	}
	w.seen[p] = true
	return false
}
