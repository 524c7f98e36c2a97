package downstream

import "iter"

// table is a session's small table of keys to values: its entries in
// one slice, each the key and its value, found by a scan while there are
// few, by an index once there are more than smallNames. A map costs an
// idle stream of a few names several times what its entries do (groups
// sized for growth, a value boxed behind a pointer); this costs the
// entries. The zero value is an empty table. Guarded by the session's mu.
type table[K comparable, V any] struct {
	entries []tableEntry[K, V] // in no order
	index   map[K]int32
}

type tableEntry[K comparable, V any] struct {
	key K
	v   V
}

// byName is a type's table by the names the client knows (typeState.subs,
// typeState.sent).
type byName[V any] = table[string, V]

// smallNames is how many entries a table scans; past it, it indexes
// them (an Envoy's EDS or CDS names of one type stay under it).
const smallNames = 32

func (t *table[K, V]) len() int { return len(t.entries) }

// find returns the position of k, -1 when absent.
func (t *table[K, V]) find(k K) int {
	if t.index != nil {
		if i, ok := t.index[k]; ok {
			return int(i)
		}
		return -1
	}
	for i := range t.entries {
		if t.entries[i].key == k {
			return i
		}
	}
	return -1
}

// get returns k's value and whether it is there.
func (t *table[K, V]) get(k K) (V, bool) {
	if i := t.find(k); i >= 0 {
		return t.entries[i].v, true
	}
	var zero V
	return zero, false
}

// has reports whether k is there.
func (t *table[K, V]) has(k K) bool { return t.find(k) >= 0 }

// ptr returns k's value in place (nil when absent), valid until the
// table next changes (set of a new key, del, reset).
func (t *table[K, V]) ptr(k K) *V {
	if i := t.find(k); i >= 0 {
		return &t.entries[i].v
	}
	return nil
}

// set sets k's value, adding it when absent. The table keeps k, not the
// equal key it had (as a map does): the copy it replaces, a request's
// own string, can go.
func (t *table[K, V]) set(k K, v V) {
	if i := t.find(k); i >= 0 {
		t.entries[i] = tableEntry[K, V]{key: k, v: v}
		if t.index != nil {
			t.index[k] = int32(i)
		}
		return
	}
	t.entries = append(t.entries, tableEntry[K, V]{key: k, v: v})
	if t.index != nil {
		t.index[k] = int32(len(t.entries) - 1)
	} else if len(t.entries) > smallNames {
		t.reindex()
	}
}

// del removes k, if there: the last entry takes its place.
func (t *table[K, V]) del(k K) {
	i := t.find(k)
	if i < 0 {
		return
	}
	last := len(t.entries) - 1
	if i != last {
		t.entries[i] = t.entries[last]
		if t.index != nil {
			t.index[t.entries[i].key] = int32(i)
		}
	}
	t.entries[last] = tableEntry[K, V]{}
	t.entries = t.entries[:last]
	if t.index != nil {
		delete(t.index, k)
	}
	t.shrink()
}

// shrink gives back what a table that emptied out has: the index once
// a scan will do again, the slice once it is mostly empty.
func (t *table[K, V]) shrink() {
	n := len(t.entries)
	if t.index != nil && n <= smallNames/2 {
		t.index = nil
	}
	switch {
	case n == 0:
		t.entries = nil
	case cap(t.entries) > smallNames && n < cap(t.entries)/4:
		t.entries = append([]tableEntry[K, V](nil), t.entries...)
	}
}

// reset empties the table: its slice is kept for reuse when it has room
// for at most keep entries, else given back.
func (t *table[K, V]) reset(keep int) {
	t.index = nil
	if cap(t.entries) > keep {
		t.entries = nil
		return
	}
	clear(t.entries)
	t.entries = t.entries[:0]
}

// grow makes room for n more entries.
func (t *table[K, V]) grow(n int) {
	if n <= 0 {
		return
	}
	if free := cap(t.entries) - len(t.entries); free < n {
		grown := make([]tableEntry[K, V], len(t.entries), len(t.entries)+n)
		copy(grown, t.entries)
		t.entries = grown
	}
	if t.index == nil && len(t.entries)+n > smallNames {
		t.reindex()
	}
}

// reindex builds the index.
func (t *table[K, V]) reindex() {
	t.index = make(map[K]int32, cap(t.entries))
	for i := range t.entries {
		t.index[t.entries[i].key] = int32(i)
	}
}

// all yields each key and its value, in no order. The loop may delete
// the key it is given (and set any key already there); it must not
// delete another.
func (t *table[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		// Backwards: deleting entry i moves the last one, seen already,
		// into its place.
		for i := len(t.entries) - 1; i >= 0; i-- {
			if i >= len(t.entries) {
				continue
			}
			if e := t.entries[i]; !yield(e.key, e.v) {
				return
			}
		}
	}
}
