package snapshot

import (
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testFP = Fingerprint{1, 2, 3}

const (
	lds      = resource.ListenerType
	globName = "xdstp://auth/envoy.config.listener.v3.Listener/dir/*"
	member   = "xdstp://auth/envoy.config.listener.v3.Listener/dir/x"
)

var (
	xdstpStream  = cache.LinkID{Authority: "auth"}
	legacyStream = cache.LinkID{Authority: "auth", Group: "g1"}
)

// fixture is a real cache on a clock the test sets.
type fixture struct {
	c   *cache.Cache
	now time.Time
}

func newFixture(t testing.TB, opts cache.Options) *fixture {
	t.Helper()
	f := &fixture{now: time.Unix(1000, 0)}
	opts.Now = func() time.Time { return f.now }
	f.c = cache.New(opts)
	t.Cleanup(f.c.Close)
	return f
}

// unbounded keeps every unwatched key.
var unbounded = cache.Options{MaxResources: -1, MaxBytes: -1}

// watcher is a session that reads nothing: it only holds keys watched.
type watcher struct{}

func (watcher) Notify(cache.Key)          {}
func (watcher) Flush(cs *cache.ChangeSet) {}

func key(s cache.LinkID, name string) cache.Key {
	return cache.Key{Link: s, TypeURL: lds, Name: name}
}

// res is a revision of size bytes that start with the origin's version.
func res(name, version string, size int) *cache.Resource {
	v := []byte(strings.Repeat("x", size))
	copy(v, version)
	return &cache.Resource{Name: name, OriginVersion: version, Body: &anypb.Any{TypeUrl: lds, Value: v}}
}

// snapFixture is a cache holding: a watched legacy resource with a TTL,
// two unwatched ones (b used more recently than c), an xdstp resource in
// a glob the origin answered, and the legacy stream's known Wildcard.
func snapFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, unbounded)
	w := watcher{}
	a := res("a", "1", 10)
	a.TTL, a.Arrived = durationpb.New(time.Minute), f.now
	f.c.Watch(w, nil, key(legacyStream, "a"), key(legacyStream, "b"), key(legacyStream, "c"),
		key(xdstpStream, globName), key(legacyStream, cache.Wildcard))
	f.c.Apply(cache.Update{Link: legacyStream, TypeURL: lds, FullState: true, Resources: []*cache.Resource{
		a, res("b", "2", 20), res("c", "3", 30),
	}})
	f.c.Apply(cache.Update{Link: xdstpStream, TypeURL: lds, Complete: []string{globName}, Resources: []*cache.Resource{
		res(member, "4", 40),
	}})
	f.c.Unwatch(w, key(legacyStream, "c"), key(legacyStream, cache.Wildcard))
	f.c.Unwatch(w, key(legacyStream, "b")) // b newer in the LRU than c
	return f
}
