package configwatch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/trustfile"
)

// DefaultDebounce is how long events must be quiet before the file is
// looked at: a Kubernetes ConfigMap update, or an editor's save, is a
// burst of events within milliseconds.
const DefaultDebounce = 300 * time.Millisecond

// Options configure a Watcher.
type Options struct {
	// Path of the config file (a symlink is followed).
	Path string
	// OnChange is called from Run's goroutine after each change, one call
	// at a time.
	OnChange func()
	// Debounce; 0: DefaultDebounce.
	Debounce time.Duration
	// MaxBytes bounds the file (config.MaxFileBytes): a larger one is
	// refused by its size, unread. <= 0: no bound.
	MaxBytes int64
	// Logger; named "configwatch". nil: no logging.
	Logger *zap.Logger
}

// Watcher watches one config file; New starts watching, Run reports
// changes until its context ends, Close stops the watch.
type Watcher struct {
	path     string            // read-only after New; filepath.Clean'ed
	onChange func()            // read-only after New
	debounce time.Duration     // read-only after New
	maxBytes int64             // read-only after New
	lg       *zap.Logger       // read-only after New
	w        *fsnotify.Watcher // read-only after New; its channels read by Run only
	// last is the SHA-256 of the content last seen (or of the reason it
	// was refused: see look); owned by Run (set by New before).
	last [sha256.Size]byte
	// names are the paths whose events are the file's own (ownNames);
	// owned by Run (set by New before).
	names map[string]bool
}

// New watches the file's directory and the file, and notes its content
// now. A directory that cannot be watched is an error (the relay then
// does not start: config_watch was asked for).
func New(o Options) (*Watcher, error) {
	lg := o.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	d := o.Debounce
	if d <= 0 {
		d = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config_watch: %w", err)
	}
	path := filepath.Clean(o.Path)
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("config_watch: watch %s: %w", dir, err)
	}
	cw := &Watcher{path: path, onChange: o.OnChange, debounce: d, maxBytes: o.MaxBytes, lg: lg.Named("configwatch"), w: w}
	cw.watchFile()
	cw.names = ownNames(path)
	cw.last, _ = cw.look() // unreadable now: any readable content is a change
	return cw, nil
}

// watchFile (re)adds the watch on the file itself: a file replaced by
// rename is a new inode, whose in-place writes the old watch never sees.
// The directory's watch covers a file that does not exist now.
func (cw *Watcher) watchFile() {
	if err := cw.w.Add(cw.path); err != nil {
		cw.lg.Debug("config file not watched itself; its directory is", zap.String("path", cw.path), zap.Error(err))
	}
}

// Run reports changes until ctx ends. It returns nil.
func (cw *Watcher) Run(ctx context.Context) error {
	quiet := time.NewTimer(cw.debounce)
	quiet.Stop()
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-cw.w.Events:
			if !ok {
				return nil
			}
			if !cw.names[filepath.Clean(ev.Name)] {
				continue // another file of the directory (a log): neither a change nor a reason to wait
			}
			cw.lg.Debug("config file event", zap.String("name", ev.Name), zap.String("op", ev.Op.String()))
			quiet.Reset(cw.debounce)
		case err, ok := <-cw.w.Errors:
			if !ok {
				return nil
			}
			// Events may have been lost (queue overflow): look anyway.
			cw.lg.Warn("config watch error; looking at the file", zap.Error(err))
			quiet.Reset(cw.debounce)
		case <-quiet.C:
			cw.check()
		}
	}
}

// check calls onChange when the file's content differs from the last
// seen, or when the file is now refused for another reason.
func (cw *Watcher) check() {
	cw.watchFile()
	cw.names = ownNames(cw.path)
	sum, err := cw.look()
	if err != nil && !trustfile.Refused(err) {
		cw.lg.Warn("config file unreadable; waiting for the next change", zap.String("path", cw.path), zap.Error(err))
		return
	}
	if sum == cw.last {
		return
	}
	cw.last = sum
	// A refused file is reloaded too: the reload refuses it, logged and
	// counted, and keeps the running config.
	cw.lg.Info("config file changed; reloading", zap.String("path", cw.path))
	cw.onChange()
}

// look is the SHA-256 of the file's content, read as config.Load reads it
// (internal/trustfile: never blocks, bounded, owner and mode). A refused
// file (trustfile.Refused) yields the SHA-256 of the reason, with the
// error: one change per reason, which no content can equal.
func (cw *Watcher) look() ([sha256.Size]byte, error) {
	sum, err := trustfile.Digest(cw.path, cw.maxBytes, trustfile.OperatorWritten)
	if trustfile.Refused(err) {
		return sha256.Sum256([]byte("refused\x00" + err.Error())), err
	}
	return sum, err
}

// Close ends the watch; Run then returns. Safe to call more than once.
func (cw *Watcher) Close() { _ = cw.w.Close() }

// maxLinks bounds the symlinks ownNames follows (a loop ends there).
const maxLinks = 8

// ownNames lists the paths in the file's directory whose events are the
// file's own: the path, and, when it is a symlink, each entry of the
// directory that its targets go through. A Kubernetes ConfigMap volume is
// config.yaml → ..data/config.yaml, ..data → ..2026_01_02_x: its update
// renames a new ..data over the old one, an event named ..data, never
// config.yaml. Events of other names (a log written beside the config)
// are not the file's.
func ownNames(path string) map[string]bool {
	dir := filepath.Dir(path)
	names := map[string]bool{path: true}
	cur := path
	for range maxLinks {
		target, err := os.Readlink(cur)
		if err != nil {
			break // not a symlink (or gone)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(cur), target)
		}
		target = filepath.Clean(target)
		for p := target; filepath.Dir(p) != p; p = filepath.Dir(p) {
			if filepath.Dir(p) == dir {
				names[p] = true
				break
			}
		}
		cur = target
	}
	return names
}
