package downstream

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestTableAsMap: a table holds what a map would through any sequence
// of sets and deletes, scanned or indexed (past smallNames), and a loop
// over it that deletes the name it is given sees every name once.
func TestTableAsMap(t *testing.T) {
	for _, size := range []int{3, smallNames, 4 * smallNames} {
		t.Run(fmt.Sprintf("names=%d", size), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(size)))
			var tab table[string, int]
			want := map[string]int{}
			for step := range 20 * size {
				name := fmt.Sprintf("n%d", rng.IntN(size))
				if rng.IntN(3) == 0 {
					tab.del(name)
					delete(want, name)
				} else {
					tab.set(name, step)
					want[name] = step
				}
				if tab.len() != len(want) {
					t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(want))
				}
			}
			got := maps.Collect(tab.all())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("entries (-map +byName):\n%s", diff)
			}
			for n, v := range want {
				if g, ok := tab.get(n); !ok || g != v || !tab.has(n) || *tab.ptr(n) != v {
					t.Fatalf("get(%q) = %d, %v; want %d", n, g, ok, v)
				}
			}
			if _, ok := tab.get("absent"); ok || tab.ptr("absent") != nil {
				t.Fatal("an absent name found")
			}
			seen := map[string]int{}
			for n := range tab.all() {
				seen[n]++
				if n[1]%2 == 0 {
					tab.del(n)
				}
			}
			for n := range want {
				if seen[n] != 1 {
					t.Fatalf("a loop deleting as it goes saw %q %d times", n, seen[n])
				}
				if _, ok := tab.get(n); ok == (n[1]%2 == 0) {
					t.Fatalf("after the loop, %q there: %v", n, ok)
				}
			}
		})
	}
}

// TestTableGivesBack: a table that grew for many names and emptied out
// keeps neither its index nor its slice; reset keeps a small one's slice
// for reuse, not a large one's.
func TestTableGivesBack(t *testing.T) {
	var tab byName[sentRev]
	tab.grow(4 * smallNames)
	for i := range 4 * smallNames {
		tab.set(fmt.Sprint(i), sentRev{seq: uint64(i)})
	}
	if tab.index == nil {
		t.Fatal("no index past smallNames")
	}
	for i := range 4*smallNames - 2 {
		tab.del(fmt.Sprint(i))
	}
	if tab.index != nil || cap(tab.entries) > smallNames {
		t.Fatalf("2 names left keep an index (%v) and room for %d", tab.index != nil, cap(tab.entries))
	}
	if h, ok := tab.get(fmt.Sprint(4*smallNames - 1)); !ok || h.seq != 4*smallNames-1 {
		t.Fatalf("last name lost: %v, %v", h, ok)
	}
	tab.del(fmt.Sprint(4*smallNames - 1))
	tab.del(fmt.Sprint(4*smallNames - 2))
	if tab.entries != nil {
		t.Fatal("an empty table keeps its slice")
	}

	var keys table[cache.Key, struct{}]
	keys.set(cache.Key{Name: "a"}, struct{}{})
	keys.reset(smallDirty)
	if keys.len() != 0 || cap(keys.entries) != 1 {
		t.Fatalf("reset of one key: %d left, room for %d; want 0 and the slice kept", keys.len(), cap(keys.entries))
	}
	for i := range 2 * smallNames {
		keys.set(cache.Key{Name: fmt.Sprint(i)}, struct{}{})
	}
	keys.reset(smallDirty)
	if keys.len() != 0 || keys.entries != nil || keys.index != nil {
		t.Fatalf("reset of %d keys keeps room for %d, an index: %v", 2*smallNames, cap(keys.entries), keys.index != nil)
	}
}

// TestLinkSetNumbers: a link's number stays its own while a subscription
// has it; a free number is taken again; several counts links in use.
func TestLinkSetNumbers(t *testing.T) {
	a, b, c := cache.LinkID{Authority: "a"}, cache.LinkID{Authority: "b"}, cache.LinkID{Authority: "c"}
	var ls linkSet
	ra := ls.add(a)
	if ls.add(a) != ra || ls.several() {
		t.Fatal("one link numbered twice, or counted as several")
	}
	rb := ls.add(b)
	rc := ls.add(c)
	if rb == ra || rc == ra || rc == rb || !ls.several() {
		t.Fatalf("numbers %d %d %d, several %v", ra, rb, rc, ls.several())
	}
	ls.remove(rb)
	if ls.id(rc) != c || ls.id(ra) != a {
		t.Fatal("a number changed its link when another link left")
	}
	if rb2 := ls.add(b); rb2 != rb || ls.id(rb2) != b {
		t.Fatalf("a free number not taken again: %d, was %d", rb2, rb)
	}
	ls.remove(ra)
	ls.remove(ra)
	ls.remove(rb)
	if ls.several() || ls.id(rc) != c {
		t.Fatalf("one link left counted as several (%v), or renumbered", ls.several())
	}
	ls.remove(rc)
	if ls.more != nil || ls.n != 0 {
		t.Fatalf("an empty set keeps %v, %d", ls.more, ls.n)
	}
}

// TestTableKeepsTheLatestKey: setting a name the table has keeps the copy
// of the name given last, as a map does, in the entries and the index: the
// one it had (a request's own string, say) is not kept alive.
func TestTableKeepsTheLatestKey(t *testing.T) {
	for _, n := range []int{1, 2 * smallNames} {
		var tab byName[int]
		for i := range n {
			tab.set(fmt.Sprint("name-", i), i)
		}
		latest := strings.Clone("name-0")
		tab.set(latest, -1)
		i := tab.find(latest)
		if got := tab.entries[i].key; unsafe.StringData(got) != unsafe.StringData(latest) {
			t.Errorf("%d names: the entry keeps the first copy of its name", n)
		}
		for k := range tab.index {
			if k == latest && unsafe.StringData(k) != unsafe.StringData(latest) {
				t.Errorf("%d names: the index keeps the first copy of the name", n)
			}
		}
	}
}
