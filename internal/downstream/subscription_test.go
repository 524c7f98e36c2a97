package downstream

import (
	"testing"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestNamesByKey: names subscribed by their key's own name keep no second
// table; another spelling of a watched key is kept beside it, and the key
// is watched until its last name goes.
func TestNamesByKey(t *testing.T) {
	ts := newTypeState(edsType)
	k := cache.Key{Link: cache.LinkID{Authority: authority}, TypeURL: edsType, Name: "xdstp://" + authority + "/" + edsType + "/a"}
	other := cache.Key{Link: k.Link, TypeURL: edsType, Name: k.Name + "-b"}
	if !ts.addLocked(k.Name, k, false) || !ts.addLocked(other.Name, other, false) {
		t.Fatal("first names of their keys not reported as newly watched")
	}
	if ts.byKey != nil {
		t.Fatalf("names spelled as their keys kept a table by key: %v", ts.byKey)
	}
	spelling := k.Name + "?" // another spelling of k, as a client may send
	if ts.addLocked(spelling, k, false) {
		t.Fatal("a second name of a watched key reported as newly watched")
	}
	var names []string
	ts.keyNamesLocked(k, func(n string, s sub) {
		if ts.keyOf(n, s) != k {
			t.Errorf("name %q given with sub %+v", n, s)
		}
		names = append(names, n)
	})
	if len(names) != 2 || names[0] != k.Name || names[1] != spelling {
		t.Fatalf("names of the key = %q, want its own and the other spelling", names)
	}
	keys := 0
	ts.eachKeyLocked(func(cache.Key) { keys++ })
	if keys != 2 {
		t.Fatalf("eachKeyLocked gave %d keys, want 2 (each once)", keys)
	}
	if _, last, _ := ts.removeLocked(k.Name); last {
		t.Fatal("key reported unwatched while another spelling maps to it")
	}
	keys = 0
	ts.eachKeyLocked(func(cache.Key) { keys++ })
	if keys != 2 {
		t.Fatalf("after dropping the own name, eachKeyLocked gave %d keys, want 2", keys)
	}
	if _, last, _ := ts.removeLocked(spelling); !last {
		t.Fatal("key still reported watched after its last name went")
	}
	if len(ts.byKey) != 0 {
		t.Fatalf("table by key kept %v after its names went", ts.byKey)
	}
}
