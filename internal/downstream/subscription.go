package downstream

import (
	"math"
	"slices"
	"sort"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// sub is one name a client subscribed to, as it spelled it
// (typeState.subs). A name subscribed by its key's own name, the common
// case, costs these 8 bytes: its key is on the type's link numbered link
// (typeState.links), of the type, named as the client spelled it
// (typeState.keyOf). A collection, a name answered by alias, or another
// spelling of its key keeps the rest in typeState.ext (ext is set).
type sub struct {
	link       uint32
	collection bool // wildcard or glob: the key's members are served
	ext        bool
}

// subExt is the part of a subscription few names need.
type subExt struct {
	key cache.Key // the subscription's key
	// glob is the parsed glob URL (glob collections only).
	glob *xdsname.Name
	// members are the names (as the origin spells them) this collection
	// contributed to the client, and memberKeys their canonical names to
	// those names; owned with the typeState.
	members    map[string]struct{}
	memberKeys map[string]string
	// emptyReported: the glob's own name went out in removed_resources.
	emptyReported bool
	// via: the resource's own name the client was sent for this name,
	// when the name is an alias of it (alias.go); "" otherwise.
	via string
}

// sentRev is what the client has of one name: the revision last sent
// (res), that it was told the name does not exist (absent), or only the
// version it declared (initial_resource_versions: neither). Its fields
// are ordered so that it takes 48 bytes, one version string among them:
// the version it has is res's, a declared one is the only one it keeps
// (version, prevVersion).
type sentRev struct {
	res *cache.Resource // nil when absent or only known by version
	// seq: the response that carried it (configstatus.go); 0 when only
	// the client's declared version is known.
	seq uint64
	// err is the resource error last sent for the name (the cache's
	// status, compared by pointer), until the resource is sent again.
	err *statuspb.Status
	// vers: with res or absent, what the client had of the name before
	// this (prevVersion: the last version it was sent and did not NACK;
	// "" when none, or it was told the name does not exist), and prevGap
	// how many responses before seq the one that carried it was: once
	// the client ACKed that one, what it runs while this is unanswered or
	// NACKed (propagation.go, ackedVersionLocked). Else the version it
	// declared ("" when none).
	vers    string
	prevGap uint32
	absent  bool
}

// sentRevOf is what a client has once response seq carried r to it.
func sentRevOf(r *cache.Resource, seq uint64) sentRev { return sentRev{res: r, seq: seq} }

// declaredRev is what a client has of a name it declared at version v
// (initial_resource_versions).
func declaredRev(v string) sentRev { return sentRev{vers: v} }

// version is the version the client has ("" when none: it was told the
// name does not exist, or has nothing).
func (h sentRev) version() string {
	switch {
	case h.res != nil:
		return h.res.Version
	case h.absent:
		return ""
	}
	return h.vers
}

// prevVersion is what the client had of the name before this (withPrev).
func (h sentRev) prevVersion() string {
	if h.res != nil || h.absent {
		return h.vers
	}
	return "" // declared: nothing before
}

// prevSent is a version a client had of a name before, and the response
// that carried it (0: it declared it); version "" when it was told the
// name does not exist, or had nothing.
type prevSent struct {
	version string
	seq     uint64
}

// withPrev returns h, a revision sent or a removal, having p as what the
// client had before it.
func (h sentRev) withPrev(p prevSent) sentRev {
	h.vers = p.version
	h.prevGap = uint32(min(h.seq-min(p.seq, h.seq), math.MaxUint32))
	return h
}

// prev is what the client had before h (withPrev); a gap too long to
// keep reads as the first response.
func (h sentRev) prev() prevSent {
	return prevSent{version: h.prevVersion(), seq: h.seq - min(uint64(h.prevGap), h.seq)}
}

// unknownName is a name that cannot be served: why (the NOT_FOUND a SotW
// client is told) and whether the client was told.
type unknownName struct {
	detail   *statuspb.Status
	reported bool
}

// typeState is a session's state for one type URL. All fields are guarded
// by the session's mu.
type typeState struct {
	typeURL string
	// subs by the name the client asked for; ext: the rest of those that
	// have more (sub.ext); colls: those that are collections (wildcard,
	// globs). Nil maps until one is.
	subs  byName[sub]
	ext   map[string]*subExt
	colls map[string]*subExt
	// byKey: for each watched key, the client's names that map to it
	// other than the key's own name (keyNamesLocked): in the common case,
	// every name its key's canonical name, it stays nil and a stream's
	// names cost no second table.
	byKey map[cache.Key][]string
	// via: resources' own names sent for names the client subscribed by
	// alias, with how many of its subscriptions they answer (alias.go);
	// nil until one is.
	via map[string]int
	// links numbers the links of the subscriptions' keys (sub.link) and
	// counts the subscriptions on each: one link, or several (onekey.go).
	links linkSet
	// sent: what the client has, by the name it knows it under.
	sent byName[sentRev]
	// force: names to answer even if unchanged (newly subscribed; delta
	// wildcard unsubscribe exception).
	force map[string]struct{}
	// unknown: names that cannot be served (authority with no
	// configuration, type not carried, denied glob); answered once (delta
	// in removed_resources, SotW with a NOT_FOUND resource error).
	unknown map[string]unknownName
	// gather: names a request subscribed, awaited together (gather.go);
	// nil when none are.
	gather *gathering

	// label: the type's label when the session took it up, under which
	// ClientCounts counts it until the session ends (a reload that lists
	// the type changes its label, not what this session counted).
	label string

	// SotW / delta bookkeeping.
	lastNonce  string // nonce of the latest response of this type
	version    uint64 // SotW version_info counter
	ackVersion string // SotW: version_info of the latest ACK

	// What the client answered, for ConfigStatus (configstatus.go):
	// answered is the highest response seq it ACKed or NACKed; nacks what
	// it NACKed (nil until a NACK).
	answered uint64
	nacks    *typeNacks
	// prop: the changes sent on this type the client has not answered
	// yet, settled by its answers (propagation.go).
	prop propagation.Tracker

	// declaredLeft bounds the entries of sent still known only by the
	// version the client declared (initial_resource_versions): set on the
	// first request, refreshed by declaredLocked; 0: none left.
	declaredLeft int32
	// explicit: the client has subscribed to a name (any, "*" included) on
	// this type, so an empty set no longer means the legacy wildcard.
	explicit bool
	// evalAll: the subscription set changed; the writer evaluates every
	// subscription of this type.
	evalAll bool
	// started: the first request of this type was seen (delta: its
	// initial_resource_versions apply).
	started bool
	// ttl: the client takes TTLs and heartbeats; wrap: which SotW
	// resources it takes in the Resource wrapper (features.go).
	ttl  bool
	wrap sotwWrap
}

// typeNacks is what a type keeps of the client's NACKs, from its first:
// how many, the latest's message, and (configstatus.go) the names of
// NACKed responses (marked, nil until one is) and the seq of the latest
// NACK marked.
type typeNacks struct {
	count   int
	last    string // error_detail message of the latest NACK
	marked  map[string]*nackMark
	lastSeq uint64
}

func newTypeState(typeURL string) *typeState {
	return &typeState{typeURL: typeURL, label: typeLabel(typeURL)}
}

// reserveLocked makes room for n more names in the tables a subscription
// fills (a request of many names grows each once, not name by name).
func (ts *typeState) reserveLocked(n int) {
	if n <= 1 {
		return
	}
	if ts.force == nil {
		ts.force = make(map[string]struct{}, n)
	}
	ts.subs.grow(n)
	ts.sent.grow(n)
}

// forceLocked marks name to be answered even if unchanged.
func (ts *typeState) forceLocked(name string) {
	if ts.force == nil {
		ts.force = make(map[string]struct{})
	}
	ts.force[name] = struct{}{}
}

// dropEmptyLocked drops the tables a round emptied (after an initial sync,
// the names it forced): an idle session keeps no table sized for a burst.
func (ts *typeState) dropEmptyLocked() {
	if len(ts.force) == 0 {
		ts.force = nil
	}
	if len(ts.unknown) == 0 {
		ts.unknown = nil
	}
}

// keyOf is the key name, subscribed as s, maps to.
func (ts *typeState) keyOf(name string, s sub) cache.Key {
	if s.ext {
		return ts.ext[name].key
	}
	return cache.Key{Link: ts.links.id(s.link), TypeURL: ts.typeURL, Name: name}
}

// extOf is the rest of name's subscription s, nil when it has none.
func (ts *typeState) extOf(name string, s sub) *subExt {
	if !s.ext {
		return nil
	}
	return ts.ext[name]
}

// viaOf is the resource's own name the client was sent for name,
// subscribed as s (alias.go); "" when none.
func (ts *typeState) viaOf(name string, s sub) string {
	if x := ts.extOf(name, s); x != nil {
		return x.via
	}
	return ""
}

// setExtLocked gives name's subscription s the rest x.
func (ts *typeState) setExtLocked(name string, s *sub, x *subExt) {
	if ts.ext == nil {
		ts.ext = make(map[string]*subExt)
	}
	ts.ext[name] = x
	s.ext = true
}

// subKeyLocked returns the key name is subscribed to, if it is.
func (ts *typeState) subKeyLocked(name string) (cache.Key, bool) {
	s, ok := ts.subs.get(name)
	if !ok {
		return cache.Key{}, false
	}
	return ts.keyOf(name, s), true
}

// addLocked subscribes name to key. It reports whether key is newly
// watched by this session (the caller then calls cache.Watch).
func (ts *typeState) addLocked(name string, key cache.Key, collection bool) (newKey bool) {
	if k, ok := ts.subKeyLocked(name); ok {
		if k == key {
			return false
		}
		ts.removeLocked(name)
	}
	s := sub{link: ts.links.add(key.Link), collection: collection}
	if collection || key.Name != name || key.TypeURL != ts.typeURL {
		ts.setExtLocked(name, &s, &subExt{key: key})
	}
	if collection {
		x := ts.ext[name]
		x.members = make(map[string]struct{})
		x.memberKeys = make(map[string]string)
		if key.Name != cache.Wildcard {
			if g, err := xdsname.Parse(key.Name); err == nil {
				x.glob = &g
			}
		}
		if ts.colls == nil {
			ts.colls = make(map[string]*subExt)
		}
		ts.colls[name] = x
	}
	ts.subs.set(name, s)
	newKey = !ts.watchesLocked(key, name)
	if name != key.Name {
		if ts.byKey == nil {
			ts.byKey = make(map[cache.Key][]string)
		}
		ts.byKey[key] = append(ts.byKey[key], name)
	}
	return newKey
}

// ownNameLocked reports whether key's own name is one of the client's
// names for it (the common case: subscribed by its canonical name).
func (ts *typeState) ownNameLocked(key cache.Key) bool {
	k, ok := ts.subKeyLocked(key.Name)
	return ok && k == key
}

// watchesLocked reports whether a name other than except maps to key.
func (ts *typeState) watchesLocked(key cache.Key, except string) bool {
	if key.Name != except && ts.ownNameLocked(key) {
		return true
	}
	for _, n := range ts.byKey[key] {
		if n != except {
			return true
		}
	}
	return false
}

// keyNamesLocked calls f with each of the client's names that map to key.
func (ts *typeState) keyNamesLocked(key cache.Key, f func(name string, s sub)) {
	if ts.ownNameLocked(key) {
		s, _ := ts.subs.get(key.Name)
		f(key.Name, s)
	}
	for _, n := range ts.byKey[key] {
		s, _ := ts.subs.get(n)
		f(n, s)
	}
}

// eachKeyLocked calls f once with each key the session watches of ts.
func (ts *typeState) eachKeyLocked(f func(cache.Key)) {
	for n, s := range ts.subs.all() {
		k := ts.keyOf(n, s)
		if n == k.Name || (!ts.ownNameLocked(k) && ts.byKey[k][0] == n) {
			f(k)
		}
	}
}

// removeLocked unsubscribes name. It returns the key and whether no name
// of this session maps to it any more (the caller then calls cache.Unwatch).
func (ts *typeState) removeLocked(name string) (key cache.Key, lastName bool, ok bool) {
	s, ok := ts.subs.get(name)
	if !ok {
		return cache.Key{}, false, false
	}
	key, x := ts.keyOf(name, s), ts.extOf(name, s)
	ts.subs.del(name)
	delete(ts.colls, name)
	ts.links.remove(s.link)
	if names := ts.byKey[key]; len(names) > 0 {
		names = slices.DeleteFunc(names, func(n string) bool { return n == name })
		if len(names) == 0 {
			delete(ts.byKey, key)
		} else {
			ts.byKey[key] = names
		}
	}
	last := !ts.watchesLocked(key, name)
	if s.collection {
		// Members the client only had through this collection are
		// forgotten (no removal is owed for an unsubscription).
		for m := range x.members {
			if !ts.subscribedLocked(m) {
				ts.sent.del(m)
			}
		}
	}
	if via := ts.viaOf(name, s); via != "" {
		ts.setViaLocked(name, &s, "")
		if !ts.subscribedLocked(via) {
			ts.sent.del(via)
		}
	}
	if delete(ts.ext, name); len(ts.ext) == 0 {
		ts.ext = nil
	}
	if !ts.subscribedLocked(name) {
		ts.sent.del(name)
	}
	delete(ts.force, name)
	return key, last, true
}

// subscribeLocked subscribes r's name to its key, noting in ed a key this
// session newly watches.
func (ts *typeState) subscribeLocked(r resolved, ed *watchEdit) {
	if ts.addLocked(r.name, r.res.Key, r.res.Collection) {
		ed.add(r.res)
	}
}

// unsubscribeLocked drops name, noting in ed a key no name of this session
// maps to any more.
func (ts *typeState) unsubscribeLocked(name string, ed *watchEdit) {
	if ts.unsubscribeViaLocked(name, ed) {
		return
	}
	if key, last, ok := ts.removeLocked(name); ok && last {
		ed.unwatch = append(ed.unwatch, key)
	}
}

// unsubscribedLocked returns the names not subscribed yet.
func (ts *typeState) unsubscribedLocked(names []string) []string {
	var out []string
	for _, n := range names {
		if !ts.subs.has(n) {
			out = append(out, n)
		}
	}
	return out
}

// keepOnlyLocked unsubscribes every name not in names (a SotW list is the
// whole subscription), noting in ed the keys to unwatch; it reports
// whether any name was dropped.
func (ts *typeState) keepOnlyLocked(names []string, ed *watchEdit) (removedAny bool) {
	want := make(map[string]struct{}, len(names))
	for _, n := range names {
		want[n] = struct{}{}
	}
	for n := range ts.subs.all() {
		if _, ok := want[n]; !ok {
			removedAny = true
			ts.unsubscribeLocked(n, ed)
		}
	}
	for n := range ts.unknown {
		if _, ok := want[n]; !ok {
			ts.forgetUnknownLocked(n)
		}
	}
	return removedAny
}

// subscribedLocked reports whether the client is subscribed to name: by a
// direct subscription, or as a member of one of its collections (then what it
// has of name is kept; otherwise it is forgotten or removed).
func (ts *typeState) subscribedLocked(name string) bool {
	if s, ok := ts.subs.get(name); ok && !s.collection {
		return true
	}
	if ts.via[name] > 0 {
		return true
	}
	return ts.inCollectionLocked(name)
}

// inCollectionLocked reports whether name is a member of a collection the
// client subscribed to.
func (ts *typeState) inCollectionLocked(name string) bool {
	for _, c := range ts.colls {
		if _, ok := c.members[name]; ok {
			return true
		}
	}
	return false
}

// contains reports whether member key k (of c's stream and type) belongs
// to collection c.
func (c *subExt) contains(k cache.Key) bool {
	if c.key.Name == cache.Wildcard {
		return true
	}
	if c.glob == nil {
		return false
	}
	u, err := xdsname.Parse(k.Name)
	return err == nil && c.glob.Matches(u)
}

// covers reports whether a name as a client spells it would be a member of
// collection c: any legacy name for the wildcard (legacy names are
// wildcard members of their group's stream), a matching xdstp URN for a glob.
func (c *subExt) covers(name string) bool {
	if c.key.Name == cache.Wildcard {
		return !xdsname.IsXDSTP(name)
	}
	if c.glob == nil {
		return false
	}
	u, err := xdsname.Parse(name)
	return err == nil && c.glob.Matches(u)
}

// setMembers replaces the collection's members with rs.
func (c *subExt) setMembers(rs []*cache.Resource) (old map[string]struct{}) {
	old = c.members
	c.members = make(map[string]struct{}, len(rs))
	c.memberKeys = make(map[string]string, len(rs))
	for _, r := range rs {
		c.members[r.Name] = struct{}{}
		canonical, err := cache.CanonicalName(r.Name)
		if err != nil {
			canonical = r.Name
		}
		c.memberKeys[canonical] = r.Name
	}
	return old
}

// member applies one member key's fresh state to collection c: it
// returns the name the client knows it by and whether it is (still) a
// member (present) or just left (left).
func (c *subExt) member(k cache.Key, r *cache.Resource, st cache.State) (name string, present, left bool) {
	if st == cache.StatePresent {
		if old, ok := c.memberKeys[k.Name]; ok && old != r.Name {
			delete(c.members, old)
		}
		c.memberKeys[k.Name] = r.Name
		c.members[r.Name] = struct{}{}
		return r.Name, true, false
	}
	name, ok := c.memberKeys[k.Name]
	if !ok {
		return "", false, false
	}
	delete(c.memberKeys, k.Name)
	delete(c.members, name)
	return name, false, true
}

// hasWildcardLocked reports whether a wildcard subscription is active.
func (ts *typeState) hasWildcardLocked() bool {
	s, ok := ts.subs.get(cache.Wildcard)
	return ok && s.collection
}

// namesLocked returns the subscribed names, sorted (for /debug/clients).
func (ts *typeState) namesLocked() []string {
	out := make([]string, 0, ts.subs.len())
	for n := range ts.subs.all() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// keptLocked is how many names the client made ts keep: subscribed,
// unknown (not served: answered as removed, remembered), and declared in
// initial_resource_versions without being subscribed. The names limit
// counts them all (checkNamesLocked).
func (ts *typeState) keptLocked() int {
	return ts.subs.len() + len(ts.unknown) + ts.declaredLocked()
}

// keepsLocked reports whether name is one of the names keptLocked counts.
func (ts *typeState) keepsLocked(name string) bool {
	if ts.subs.has(name) {
		return true
	}
	if _, ok := ts.unknown[name]; ok {
		return true
	}
	return declared(ts, name)
}

// declaredLocked counts the names still known only by their declared
// version that are not subscribed. Declared entries are only made on a
// type's first request, so their number only falls: once none is left,
// this costs nothing.
func (ts *typeState) declaredLocked() int {
	if ts.declaredLeft == 0 {
		return 0
	}
	left, notSubscribed := 0, 0
	for n := range ts.sent.all() {
		if !declared(ts, n) {
			continue
		}
		left++
		if !ts.subs.has(n) {
			notSubscribed++
		}
	}
	ts.declaredLeft = int32(left)
	return notSubscribed
}

// forgetUnknownLocked drops name from the names that cannot be served
// (the client unsubscribed it), and what the client was told of it.
func (ts *typeState) forgetUnknownLocked(name string) {
	if _, ok := ts.unknown[name]; !ok {
		return
	}
	delete(ts.unknown, name)
	if !ts.subscribedLocked(name) {
		ts.sent.del(name)
	}
}
