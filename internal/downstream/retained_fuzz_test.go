package downstream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// fuzzLimits are small limits, so that a short input can reach each.
var fuzzLimits = Limits{MaxStreams: 100, MaxNamesPerStream: 24, MaxNameLength: 96, MaxTypesPerStream: 3, MaxVersionLength: 40,
	MaxGroupsPerAuthority: 4, MaxNewGroupsPerStream: 4}

// retainedBound is the most one stream may make the relay keep under l,
// in bytes (docs/limits.md gives it for the defaults): per name kept, its
// string up to twice (as asked and in canonical form), a declared version,
// and the maps and structs that index it; per type, its state; and the
// Node, the log context and the aggregation group keys.
func retainedBound(l Limits) int64 {
	const (
		perName = 768  // sub, map entries in subs, byKey, sent, force, unknown
		perType = 3072 // typeState and its empty maps, its work buffers
		base    = 8192 // session, kept Node strings' overhead, groups, decisions
	)
	nodeStrings := int64(5 * l.MaxNameLength) // id, cluster, locality (no metadata: rules read none here)
	return base + nodeStrings + int64(maxGroupsKept*l.MaxNameLength) +
		int64(l.MaxTypesPerStream)*(perType+int64(l.MaxNameLength)) +
		int64(l.MaxNamesPerStream)*(perName+2*int64(l.MaxNameLength)+int64(l.MaxVersionLength)+int64(maxClientText))
}

// retainedNames are what the fuzzed client asks for: served names (xdstp,
// a non-canonical spelling, a glob, legacy), names the relay answers as
// removed (an authority with no configuration), the wildcard, and names
// as long as max_name_length lets through.
func retainedName(typeURL string, arg byte) string {
	id := fmt.Sprintf("n%d", arg%32)
	switch arg >> 5 {
	case 0:
		return xdstp(typeURL, id)
	case 1:
		return "xdstp://nowhere.example/" + strings.TrimPrefix(typeURL, resourcev3.APITypePrefix) + "/" + id
	case 2:
		return "legacy-" + id
	case 3:
		return xdstp(typeURL, "p/"+id+"?b=2&a=1")
	case 4:
		return xdstp(typeURL, "dir/*")
	case 5:
		return "*"
	case 6:
		long := xdstp(typeURL, id+"-")
		return long + strings.Repeat("x", max(0, fuzzLimits.MaxNameLength-len(long)))
	}
	legacy := "legacy-" + id + "-"
	return legacy + strings.Repeat("y", fuzzLimits.MaxNameLength-len(legacy))
}

var retainedTypes = []string{edsType, ldsType, cdsType, resourcev3.SecretType}

// FuzzRetained drives one client, delta or SotW, through a fuzzed sequence
// of what a hostile client sends: names of every kind and state, in
// batches, unsubscriptions, initial_resource_versions over several types,
// ACKs and NACKs carrying long versions, nonces and messages, a Node with
// metadata no rule reads. After each request the relay has handled, the
// bytes its session keeps (retainedBytes: measured by walking its state,
// not estimated from the input) stay under retainedBound of the limits.
func FuzzRetained(f *testing.F) {
	f.Add([]byte{0, 0x20, 0x21, 0x22, 0x23, 1, 0x20, 2, 0x40, 3, 0})
	f.Add([]byte{1, 0xc0, 0xc1, 0xc2, 0xe0, 0xe1, 0x60, 0x80, 0xa0, 4, 5})
	f.Add([]byte{0, 4, 0x01, 4, 0x02, 4, 0x03, 0x24, 0x25, 5, 0x26})
	f.Add([]byte{1, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 6, 0x4b})
	f.Fuzz(fuzzRetained)
}

func fuzzRetained(t *testing.T, data []byte) {
	{
		if len(data) < 2 {
			return
		}
		if len(data) > 48 {
			data = data[:48] // bounded: each request is real RPC work
		}
		quietLogs.Store(true)
		defer quietLogs.Store(false)
		e := newEnv(t, 0)
		if err := e.srv.SetLimits(fuzzLimits); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			e.put(edsType, xdstp(edsType, fmt.Sprintf("n%d", i)), "1")
			e.put(edsType, xdstp(edsType, fmt.Sprintf("dir/m%d", i)), "1")
		}
		delta := data[0]&1 == 1
		md, err := structpb.NewStruct(map[string]any{"unread": strings.Repeat("m", 256<<10)})
		if err != nil {
			t.Fatal(err)
		}
		node := &corev3.Node{Id: strings.Repeat("i", fuzzLimits.MaxNameLength), Cluster: "c", Metadata: md}

		c := openFuzzClient(t, e, delta)
		sent := 0
		send := func(typeURL string, names, unsub []string, versions map[string]string, nonce, version string, nack bool) {
			var detail *rpcstatus.Status
			if nack {
				detail = &rpcstatus.Status{Code: 3, Message: strings.Repeat("e", 4096)}
			}
			sent++
			if nonce == "" {
				nonce = c.lastNonce()
			}
			// Errors ignored: the server may have ended the stream.
			if delta {
				_ = c.sendD(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNamesSubscribe: names,
					ResourceNamesUnsubscribe: unsub, InitialResourceVersions: versions, ResponseNonce: nonce, ErrorDetail: detail})
			} else {
				_ = c.sendS(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names,
					VersionInfo: version, ResponseNonce: nonce, ErrorDetail: detail})
			}
		}
		var batch []string
		for i := 1; i < len(data); i++ {
			b := data[i]
			typeURL := retainedTypes[int(b)%len(retainedTypes)]
			switch {
			case b < 0x08: // send the batch collected so far, on a type
				send(typeURL, batch, nil, nil, "", "", false)
				batch = nil
			case b < 0x0c: // unsubscribe the batch (SotW: keep only it)
				send(typeURL, nil, batch, nil, "", "", false)
				batch = nil
			case b < 0x10: // declare versions of the batch, long ones
				versions := make(map[string]string, len(batch))
				for j, n := range batch {
					versions[n] = strings.Repeat("v", (j*7)%(fuzzLimits.MaxVersionLength+2))
				}
				send(typeURL, batch, nil, versions, "", "", false)
				batch = nil
			case b < 0x18: // ACK or NACK with a long version (and nonce)
				long := int(b-0x10) * 6
				nonce := c.lastNonce()
				if b&2 == 2 {
					nonce = strings.Repeat("1", long)
				}
				send(typeURL, nil, nil, nil, nonce, strings.Repeat("9", long), b&1 == 1)
			default: // one more name for the next batch
				batch = append(batch, retainedName(edsType, b))
			}
			if over := e.measureRetained(t, c, sent); over > 0 {
				t.Fatalf("after request %d the session keeps %d bytes, over the bound of %d", sent, over, retainedBound(fuzzLimits))
			}
		}
	}
}

// measureRetained returns the bytes c's session keeps beyond
// retainedBound(fuzzLimits), 0 when within it.
func (e *env) measureRetained(t *testing.T, c *fuzzClient, sent int) int64 {
	if n := e.measureRetainedBytes(t, c, sent, xdstest.WaitTimeout); n > retainedBound(fuzzLimits) {
		return n
	}
	return 0
}

// measureRetainedBytes waits up to within until the server has handled
// the sent requests of c, the env's one stream (or ended it), and its
// writer is idle, then returns the bytes its session keeps (0 once it
// ended).
func (e *env) measureRetainedBytes(t testing.TB, c *fuzzClient, sent int, within time.Duration) int64 {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		handled := 0
		for _, typ := range retainedTypes {
			handled += int(testutil.ToFloat64(e.srv.m.requests.WithLabelValues(typeLabel(typ))))
		}
		sessions := e.srv.listSessions()
		if len(sessions) == 0 {
			select {
			case <-c.ended:
				return 0 // the stream ended: it keeps nothing
			default:
			}
			if sent == 0 || handled > 0 {
				return 0 // not started, or ended (it was there to count a request)
			}
		}
		if len(sessions) == 0 {
			select {
			case <-deadline.C:
				t.Fatalf("no session for the stream within %v", within)
			case <-tick.C:
			}
			continue
		}
		ss := sessions[0]
		ss.mu.Lock()
		if handled >= sent && !ss.writer.pausedLocked() && !ss.writer.running {
			n := retainedBytes(ss)
			ss.mu.Unlock()
			return n
		}
		ss.mu.Unlock()
		select {
		case <-deadline.C:
			t.Fatalf("the server handled %d of %d requests (and its writer is not idle) within %v", handled, sent, within)
		case <-tick.C:
		}
	}
}
