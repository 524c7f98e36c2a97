package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// fileSource serves a directory of resource files as an origin: each
// .yaml/.yml/.json file directly in the directory has one typed resource
// (protojson with "@type") or a whole DiscoveryResponse. The directory is
// the whole state. It is re-read on every change fsnotify reports; a file
// that cannot be read or parsed is logged, counted and skipped, and its
// last good content stays.
type fileSource struct {
	authority string      // read-only
	dir       string      // read-only
	lg        *zap.Logger // read-only
	metrics   *metrics    // read-only
	// started: its run goroutine was started. guarded by Manager.mu
	started bool

	mu sync.Mutex
	// files: last good parse of each file, by path. guarded by mu
	files map[string]*parsedFile
	// state: type URL → canonical name → resource, built from files.
	// guarded by mu
	state map[string]map[string]*cache.Resource
	// ready: the first scan is done; err: the directory cannot be watched.
	// guarded by mu
	ready bool
	err   error
	// listeners are poked after each change. guarded by mu
	listeners map[chan struct{}]struct{}
	// problems: what is wrong with each file now, by path (cleared when
	// the file reads well or goes), and with the directory (key "").
	// guarded by mu
	problems map[string]FileProblem
}

// FileProblem is what is wrong with one file of a file source (or, File
// empty, with its directory), as /debug/upstreams and the status page
// show it.
type FileProblem struct {
	File string `json:"file,omitempty"`
	// Error, with the file's line when known ("line 7: ...").
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// parsedFile is one file's last attempt (by content hash) and last good
// resources.
type parsedFile struct {
	hash      string
	resources []*fileResource // last good parse
}

type fileResource struct {
	typeURL string
	res     *cache.Resource
}

func newFileSource(authority, dir string, lg *zap.Logger, m *metrics) *fileSource {
	return &fileSource{
		authority: authority,
		dir:       dir,
		lg:        lg.Named("file").With(zap.String("authority", authority), zap.String("dir", dir)),
		metrics:   m,
		files:     make(map[string]*parsedFile),
		state:     make(map[string]map[string]*cache.Resource),
		listeners: make(map[chan struct{}]struct{}),
		problems:  make(map[string]FileProblem),
	}
}

// run watches the directory until ctx ends.
func (f *fileSource) run(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(f.dir)
		if err != nil {
			w.Close()
		}
	}
	if err != nil {
		f.lg.Error("file source cannot watch its directory", zap.Error(err))
		f.metrics.fileErrors.WithLabelValues(f.authority).Inc()
		f.mu.Lock()
		f.err, f.ready = fmt.Errorf("file source %s: watch: %w", f.dir, err), true
		f.problems[""] = FileProblem{Error: f.err.Error(), At: time.Now().UTC()}
		f.mu.Unlock()
		f.notify()
		return
	}
	defer w.Close()
	f.scan()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			f.lg.Debug("file event", zap.String("file", ev.Name), zap.String("op", ev.Op.String()))
			f.scan()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			f.lg.Warn("file watch error; rescanning", zap.Error(err))
			f.scan()
		}
	}
}

// subscribe returns a channel poked after every change, and its cancel.
func (f *fileSource) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.listeners[ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.listeners, ch)
		f.mu.Unlock()
	}
}

func (f *fileSource) notify() {
	f.mu.Lock()
	ls := make([]chan struct{}, 0, len(f.listeners))
	for ch := range f.listeners {
		ls = append(ls, ch)
	}
	f.mu.Unlock()
	for _, ch := range ls {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// resources returns the current resources of typeURL; ok is false until
// the first scan, err is set when the directory cannot be watched.
func (f *fileSource) resources(typeURL string) (rs []*cache.Resource, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.state[typeURL] {
		rs = append(rs, r)
	}
	return rs, f.ready, f.err
}

// scan re-reads the directory: files whose content changed are parsed
// again; removed files drop their resources.
func (f *fileSource) scan() {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		f.lg.Error("file source cannot read its directory", zap.Error(err))
		f.metrics.fileErrors.WithLabelValues(f.authority).Inc()
		f.mu.Lock()
		f.problems[""] = FileProblem{Error: err.Error(), At: time.Now().UTC()}
		f.mu.Unlock()
		return
	}
	f.mu.Lock()
	old := f.files
	f.mu.Unlock()
	problems := make(map[string]FileProblem)
	files := make(map[string]*parsedFile, len(entries))
	for _, de := range entries {
		if !isSourceFile(de) {
			continue
		}
		path := filepath.Join(f.dir, de.Name())
		if p := f.readFile(path, old[path], problems); p != nil {
			files[path] = p
		}
	}
	state := f.merge(files, problems)
	f.mu.Lock()
	f.files, f.state, f.ready, f.err, f.problems = files, state, true, nil, problems
	f.mu.Unlock()
	f.notify()
}

// isSourceFile says whether directory entry de is a file the source reads:
// YAML or JSON, not hidden.
func isSourceFile(de os.DirEntry) bool {
	ext := strings.ToLower(filepath.Ext(de.Name()))
	return !de.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") && !strings.HasPrefix(de.Name(), ".")
}

// readFile returns what the file at path has now, given prev, what the
// last scan parsed of it (nil: none): prev when its content is unchanged
// or it cannot be read, its last good resources under the new content's
// hash when that is bad (so it is reported once), nil when it is gone.
// Problems go to problems.
func (f *fileSource) readFile(path string, prev *parsedFile, problems map[string]FileProblem) *parsedFile {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed meanwhile
		}
		f.badFile(problems, path, err)
		return prev
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:8])
	if prev != nil && prev.hash == hash {
		if p, bad := f.problem(path); bad {
			problems[path] = p // still bad, reported once
		}
		return prev
	}
	rs, err := parseFile(raw, time.Now())
	if err != nil {
		f.badFile(problems, path, err)
		if prev != nil {
			// Remember the bad content's hash so it is reported once,
			// keep the last good resources.
			return &parsedFile{hash: hash, resources: prev.resources}
		}
		return &parsedFile{hash: hash}
	}
	return &parsedFile{hash: hash, resources: rs}
}

// merge returns the resources of files by type and canonical name. Files
// are taken in path order; a name a file defines again is skipped, a
// problem of that file.
func (f *fileSource) merge(files map[string]*parsedFile, problems map[string]FileProblem) map[string]map[string]*cache.Resource {
	state := make(map[string]map[string]*cache.Resource)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for _, fr := range files[p].resources {
			byName := state[fr.typeURL]
			if byName == nil {
				byName = make(map[string]*cache.Resource)
				state[fr.typeURL] = byName
			}
			c, _ := cache.CanonicalName(fr.res.Name)
			if _, dup := byName[c]; dup {
				f.badFile(problems, p, fmt.Errorf("resource %q of type %s is already defined by another file; skipped", fr.res.Name, fr.typeURL))
				continue
			}
			byName[c] = fr.res
		}
	}
	return state
}

// badFile reports the problem err of the file at path and records it in
// problems.
func (f *fileSource) badFile(problems map[string]FileProblem, path string, err error) {
	f.fileError(path, err)
	problems[path] = FileProblem{File: path, Error: err.Error(), At: time.Now().UTC()}
}

// problem returns the problem recorded for path.
func (f *fileSource) problem(path string) (FileProblem, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.problems[path]
	return p, ok
}

// problemList returns what is wrong with the source now, by file.
func (f *fileSource) problemList() []FileProblem {
	f.mu.Lock()
	out := make([]FileProblem, 0, len(f.problems))
	for _, p := range f.problems {
		out = append(out, p)
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b FileProblem) int { return strings.Compare(a.File, b.File) })
	return out
}

func (f *fileSource) fileError(path string, err error) {
	f.lg.Error("file source: file skipped, last good version kept", zap.String("file", path), zap.Error(err))
	f.metrics.fileErrors.WithLabelValues(f.authority).Inc()
}

// parseFile parses one file: YAML or JSON, a typed resource with "@type" or
// a DiscoveryResponse. Each resource's version is a hash of its bytes.
func parseFile(raw []byte, now time.Time) ([]*fileResource, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(js, &probe); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	var anys []*anypb.Any
	if _, typed := probe["@type"]; typed {
		var a anypb.Any
		if err := protojson.Unmarshal(js, &a); err != nil {
			return nil, yamlLineError(fmt.Errorf("resource: %w", err), raw, js)
		}
		anys = append(anys, &a)
	} else {
		var dr discoveryv3.DiscoveryResponse
		if err := protojson.Unmarshal(js, &dr); err != nil {
			return nil, yamlLineError(fmt.Errorf("neither a resource with \"@type\" nor a DiscoveryResponse: %w", err), raw, js)
		}
		for i, a := range dr.GetResources() {
			if dr.GetTypeUrl() != "" && a.GetTypeUrl() != dr.GetTypeUrl() {
				return nil, fmt.Errorf("resources[%d] has type %s, type_url is %s", i, a.GetTypeUrl(), dr.GetTypeUrl())
			}
		}
		anys = dr.GetResources()
	}
	out := make([]*fileResource, 0, len(anys))
	seen := names{}
	for i, a := range anys {
		msg, err := decode(a)
		if err != nil || msg == nil {
			return nil, fmt.Errorf("resources[%d] of type %s cannot be decoded: %v", i, a.GetTypeUrl(), err)
		}
		name := cachev3.GetResourceName(msg)
		if name == "" {
			return nil, fmt.Errorf("resources[%d] of type %s has no name", i, a.GetTypeUrl())
		}
		if _, err := seen.add(name); err != nil {
			return nil, err
		}
		body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			return nil, fmt.Errorf("resource %q: %w", name, err)
		}
		// No version: the cache versions every resource by its bytes.
		out = append(out, &fileResource{typeURL: a.GetTypeUrl(), res: &cache.Resource{
			Name:    name,
			Body:    &anypb.Any{TypeUrl: a.GetTypeUrl(), Value: body},
			Arrived: now,
		}})
	}
	return out, nil
}

// fileAttempt feeds the cache from a file source for this link: on start,
// on every change of the directory and of the link's subscriptions, the
// full state of each subscribed type (FullState; every subscription is
// complete). It counts in xds_relay_upstream_streams like an ADS stream.
func (l *link) fileAttempt(ctx context.Context, fs *fileSource) (bool, error) {
	changed, cancel := fs.subscribe()
	defer cancel()
	l.mgr.metrics.streams.WithLabelValues(l.id.Authority).Inc()
	defer l.mgr.metrics.streams.WithLabelValues(l.id.Authority).Dec()
	for {
		if err := l.fileApply(fs); err != nil {
			return false, err
		}
		l.answered() // the directory is the origin's answer
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-changed:
		case <-l.poke:
		}
	}
}

func (l *link) fileApply(fs *fileSource) error {
	_, wants := l.copyWants()
	for t, w := range wants {
		rs, ok, err := fs.resources(t)
		if err != nil {
			return err
		}
		if !ok {
			return nil // first scan not done: wait for its poke
		}
		complete := make([]string, 0, len(w.names)+len(w.emulatedGlobs))
		for n := range w.names {
			complete = append(complete, n)
		}
		complete = append(complete, w.emulatedGlobs...)
		l.mgr.cache.Apply(cache.Update{Link: l.id, TypeURL: t, Resources: rs, FullState: true, Complete: complete})
	}
	return nil
}
