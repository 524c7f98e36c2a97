package downstream

import "iter"

// byName is a session's table of one type's names to their state
// (typeState.subs, typeState.sent): the entries in one slice, each the
// name and its value, found by a scan while there are few, by an index
// once there are more than smallNames. A map costs an idle stream of a
// few names several times what its entries do (groups sized for growth,
// a value boxed behind a pointer); this costs the entries. The zero value
// is an empty table. Guarded by the session's mu, as the typeState.
type byName[V any] struct {
	entries []nameEntry[V] // in no order
	index   map[string]int32
}

type nameEntry[V any] struct {
	name string
	v    V
}

// smallNames is how many entries a byName scans; past it, it indexes
// them (an Envoy's EDS or CDS names of one type stay under it).
const smallNames = 32

func (t *byName[V]) len() int { return len(t.entries) }

// find returns the position of name, -1 when absent.
func (t *byName[V]) find(name string) int {
	if t.index != nil {
		if i, ok := t.index[name]; ok {
			return int(i)
		}
		return -1
	}
	for i := range t.entries {
		if t.entries[i].name == name {
			return i
		}
	}
	return -1
}

// get returns name's value and whether it is there.
func (t *byName[V]) get(name string) (V, bool) {
	if i := t.find(name); i >= 0 {
		return t.entries[i].v, true
	}
	var zero V
	return zero, false
}

// has reports whether name is there.
func (t *byName[V]) has(name string) bool { return t.find(name) >= 0 }

// ptr returns name's value in place (nil when absent), valid until the
// table next changes (set of a new name, del).
func (t *byName[V]) ptr(name string) *V {
	if i := t.find(name); i >= 0 {
		return &t.entries[i].v
	}
	return nil
}

// set sets name's value, adding it when absent.
func (t *byName[V]) set(name string, v V) {
	if i := t.find(name); i >= 0 {
		t.entries[i].v = v
		return
	}
	t.entries = append(t.entries, nameEntry[V]{name: name, v: v})
	if t.index != nil {
		t.index[name] = int32(len(t.entries) - 1)
	} else if len(t.entries) > smallNames {
		t.reindex()
	}
}

// del removes name, if there: the last entry takes its place.
func (t *byName[V]) del(name string) {
	i := t.find(name)
	if i < 0 {
		return
	}
	last := len(t.entries) - 1
	if i != last {
		t.entries[i] = t.entries[last]
		if t.index != nil {
			t.index[t.entries[i].name] = int32(i)
		}
	}
	t.entries[last] = nameEntry[V]{}
	t.entries = t.entries[:last]
	if t.index != nil {
		delete(t.index, name)
	}
	t.shrink()
}

// shrink gives back what a table that emptied out holds: the index once
// a scan will do again, the slice once it is mostly empty.
func (t *byName[V]) shrink() {
	n := len(t.entries)
	if t.index != nil && n <= smallNames/2 {
		t.index = nil
	}
	switch {
	case n == 0:
		t.entries = nil
	case cap(t.entries) > smallNames && n < cap(t.entries)/4:
		t.entries = append([]nameEntry[V](nil), t.entries...)
	}
}

// grow makes room for n more names.
func (t *byName[V]) grow(n int) {
	if n <= 0 {
		return
	}
	if free := cap(t.entries) - len(t.entries); free < n {
		grown := make([]nameEntry[V], len(t.entries), len(t.entries)+n)
		copy(grown, t.entries)
		t.entries = grown
	}
	if t.index == nil && len(t.entries)+n > smallNames {
		t.reindex()
	}
}

// reindex builds the index.
func (t *byName[V]) reindex() {
	t.index = make(map[string]int32, cap(t.entries))
	for i := range t.entries {
		t.index[t.entries[i].name] = int32(i)
	}
}

// all yields each name and its value, in no order. The loop may delete
// the name it is given (and set any name already there); it must not
// delete another.
func (t *byName[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		// Backwards: deleting entry i moves the last one, seen already,
		// into its place.
		for i := len(t.entries) - 1; i >= 0; i-- {
			if i >= len(t.entries) {
				continue
			}
			if e := t.entries[i]; !yield(e.name, e.v) {
				return
			}
		}
	}
}
