// Command origin is the benchmark's origin control plane: go-control-plane's
// server over a LinearCache of R ClusterLoadAssignments of about 1 KiB, with
// xdstp names under one authority (--names xdstp) or plain names cla-NNNN
// (--names plain; LinearCache answers a name whatever the client's node).
// It serves SotW and delta ADS on --listen, and on --admin:
//
//	POST /push[?index=i]  replace one resource (round-robin by default) with a
//	                      new revision stamped with the push time
//	POST /push?name=N     the same for the resource named N
//	POST /push?all=1      replace every resource with a new revision, all
//	                      stamped with the same push time, in one change of
//	                      the cache (so each client gets one response)
//	POST /push?count=K    replace K resources in one change of the cache (a
//	                      deploy), a seeded random set that depends only on
//	                      R, K and how many such pushes came before; the
//	                      answer lists their names
//	GET  /stats           streams and subscriptions held, requests received,
//	                      responses and bytes sent (JSON)
//	GET  /metrics         the Go runtime's figures (heap, stacks, goroutines),
//	                      Prometheus's Go collector as the relay registers it
//	GET  /names           the resource names, one per line
//
// Usage: go run ./bench/origin --listen 127.0.0.1:18000 --admin 127.0.0.1:18001
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "origin:", err)
		os.Exit(1)
	}
}

// origin holds the resources and pushes new revisions.
type origin struct {
	cache     *cachev3.LinearCache // read-only after start
	rec       *recorder            // read-only after start
	names     []string             // read-only after start
	size      int                  // read-only after start
	mu        sync.Mutex
	next, rev int    // guarded by mu: next index to push, revision counter
	deploys   uint64 // guarded by mu: pushes of a count so far (the seed of the next set)
}

// newOrigin returns an origin holding count resources of about size bytes,
// named by scheme (xdstp under authority, or plain), at their initial
// (unstamped) revision.
func newOrigin(count, size int, scheme, authority string) (*origin, error) {
	o := &origin{
		cache: cachev3.NewLinearCache(resourcev3.EndpointType),
		rec:   newRecorder(),
		size:  size,
	}
	for i := 0; i < count; i++ {
		n := resourceName(scheme, authority, i)
		o.names = append(o.names, n)
		if err := o.cache.UpdateResource(n, buildCLA(n, size, 0, time.Time{})); err != nil {
			return nil, fmt.Errorf("seed %s: %w", n, err)
		}
	}
	return o, nil
}

func run(args []string) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	o, err := newOrigin(f.count, f.size, f.scheme, f.authority)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return o.serve(ctx, f.listen, f.admin, f.size)
}

// originFlags is what the origin was asked to serve, and where.
type originFlags struct {
	listen, admin     string
	count, size       int
	authority, scheme string
}

// parseFlags defines the origin's flags, parses args and checks them.
func parseFlags(args []string) (*originFlags, error) {
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	var f originFlags
	fs.StringVar(&f.listen, "listen", "127.0.0.1:18000", "xDS gRPC `host:port`")
	fs.StringVar(&f.admin, "admin", "127.0.0.1:18001", "control HTTP `host:port`")
	fs.IntVar(&f.count, "resources", 10, "number of ClusterLoadAssignments")
	fs.IntVar(&f.size, "size", 1024, "approximate serialized size of each resource, bytes")
	fs.StringVar(&f.authority, "authority", "bench.local", "xdstp authority of the resource names")
	fs.StringVar(&f.scheme, "names", namesXDSTP, "resource names: xdstp (xdstp://AUTHORITY/.../bench/cla-NNNN) or plain (cla-NNNN)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.count < 1 || f.size < 1 {
		return nil, fmt.Errorf("--resources and --size must be at least 1")
	}
	if f.scheme != namesXDSTP && f.scheme != namesPlain {
		return nil, fmt.Errorf("--names %q: want %s or %s", f.scheme, namesXDSTP, namesPlain)
	}
	return &f, nil
}

// serve serves xDS on listen and the control endpoints on admin until ctx
// ends or a server fails; size is the resources' requested size, for the
// startup line.
func (o *origin) serve(ctx context.Context, listen, admin string, size int) error {
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, o.cache, o.rec.callbacks()))
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("xDS listener: %w", err)
	}
	alis, err := net.Listen("tcp", admin)
	if err != nil {
		lis.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	hs := &http.Server{Handler: o.handler(), ReadHeaderTimeout: 5 * time.Second}

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := gs.Serve(lis); err != nil {
			errc <- fmt.Errorf("xDS server: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := hs.Serve(alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin server: %w", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "origin: %d resources of %d bytes; xDS on %s, admin on http://%s\n",
		len(o.names), proto.Size(buildCLA(o.names[0], size, 0, time.Time{})), lis.Addr(), alis.Addr())

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	_ = hs.Close() // shutting down
	gs.Stop()
	wg.Wait()
	return err
}

func (o *origin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /push", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if v := q.Get("count"); v != "" {
			k, err := strconv.Atoi(v)
			if err != nil || k < 1 || k > len(o.names) || q.Has("all") || q.Has("index") {
				http.Error(w, fmt.Sprintf("count=%q: want 1..%d (and no all or index)", v, len(o.names)), http.StatusBadRequest)
				return
			}
			names, at, err := o.pushSome(k)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, map[string]any{"resources": len(names), "names": names, "pushed_unix_nano": at.UnixNano()})
			return
		}
		if v := q.Get("all"); v != "" {
			all, err := strconv.ParseBool(v)
			if err != nil || q.Has("index") {
				http.Error(w, fmt.Sprintf("all=%q: want all=1 (and no index) or all=0", v), http.StatusBadRequest)
				return
			}
			if all {
				n, at, err := o.pushAll()
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				writeJSON(w, map[string]any{"resources": n, "pushed_unix_nano": at.UnixNano()})
				return
			}
		}
		o.pushOne(w, q)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, o.rec.snapshot())
	})
	mux.HandleFunc("GET /names", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, strings.Join(o.names, "\n"))
	})
	mux.Handle("GET /metrics", runtimeMetrics())
	return mux
}

// pushOne serves POST /push without all or count: the resource named or
// indexed, or the next one round-robin.
func (o *origin) pushOne(w http.ResponseWriter, q url.Values) {
	idx := -1
	if v := q.Get("name"); v != "" {
		idx = slices.Index(o.names, v)
		if idx < 0 || q.Has("index") {
			http.Error(w, fmt.Sprintf("name %q: not one of the %d resources (GET /names lists them), or given with index", v, len(o.names)), http.StatusBadRequest)
			return
		}
	} else if v := q.Get("index"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(o.names) {
			http.Error(w, fmt.Sprintf("index %q: want 0..%d", v, len(o.names)-1), http.StatusBadRequest)
			return
		}
		idx = i
	}
	name, at, err := o.push(idx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, map[string]any{"name": name, "pushed_unix_nano": at.UnixNano()})
}

// push replaces resource idx (the next one round-robin when idx < 0) with
// a new revision stamped now.
func (o *origin) push(idx int) (string, time.Time, error) {
	o.mu.Lock()
	if idx < 0 {
		idx = o.next
		o.next = (o.next + 1) % len(o.names)
	}
	o.rev++
	rev := o.rev
	o.mu.Unlock()
	name := o.names[idx]
	now := time.Now()
	res := buildCLA(name, o.size, rev, now)
	o.rec.pushed(name)
	if err := o.cache.UpdateResource(name, res); err != nil {
		return "", time.Time{}, fmt.Errorf("push %s: %w", name, err)
	}
	return name, now, nil
}

// pushAll replaces every resource with a new revision stamped now, in one
// UpdateResources call: go-control-plane computes one response per watch
// from it, as when a deploy touches every cluster or a snapshot origin
// republishes a whole type. It returns how many resources it replaced.
func (o *origin) pushAll() (int, time.Time, error) {
	o.mu.Lock()
	o.rev++
	rev := o.rev
	o.mu.Unlock()
	now := time.Now()
	res := make(map[string]types.Resource, len(o.names))
	for _, name := range o.names {
		res[name] = buildCLA(name, o.size, rev, now)
	}
	o.rec.pushed(o.names...)
	if err := o.cache.UpdateResources(res, nil); err != nil {
		return 0, time.Time{}, fmt.Errorf("push all %d resources: %w", len(res), err)
	}
	return len(res), now, nil
}

// pushSome replaces k resources with a new revision stamped now, in one
// UpdateResources call (a deploy touching k services): the set deploySet
// picks for this push. It returns their names in index order.
func (o *origin) pushSome(k int) ([]string, time.Time, error) {
	o.mu.Lock()
	o.rev++
	rev := o.rev
	seq := o.deploys
	o.deploys++
	o.mu.Unlock()
	now := time.Now()
	idx := deploySet(len(o.names), k, seq)
	names := make([]string, len(idx))
	res := make(map[string]types.Resource, len(idx))
	for i, j := range idx {
		names[i] = o.names[j]
		res[names[i]] = buildCLA(names[i], o.size, rev, now)
	}
	o.rec.pushed(names...)
	if err := o.cache.UpdateResources(res, nil); err != nil {
		return nil, time.Time{}, fmt.Errorf("push %d resources: %w", len(res), err)
	}
	return names, now, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the peer hung up: nothing to do
}
