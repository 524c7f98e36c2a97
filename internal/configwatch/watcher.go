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
	// Logger; named "configwatch". nil: no logging.
	Logger *zap.Logger
}

// Watcher watches one config file; New starts watching, Run reports
// changes until its context ends, Close releases the watch.
type Watcher struct {
	path     string            // read-only after New
	onChange func()            // read-only after New
	debounce time.Duration     // read-only after New
	lg       *zap.Logger       // read-only after New
	w        *fsnotify.Watcher // read-only after New; its channels read by Run only
	// last is the SHA-256 of the content last seen; owned by Run (set by
	// New before).
	last [sha256.Size]byte
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
	dir := filepath.Dir(o.Path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("config_watch: watch %s: %w", dir, err)
	}
	cw := &Watcher{path: o.Path, onChange: o.OnChange, debounce: d, lg: lg.Named("configwatch"), w: w}
	cw.watchFile()
	cw.last, _ = digest(o.Path) // unreadable now: any readable content is a change
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
			cw.lg.Debug("config directory event", zap.String("name", ev.Name), zap.String("op", ev.Op.String()))
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
// seen.
func (cw *Watcher) check() {
	cw.watchFile()
	sum, err := digest(cw.path)
	if err != nil {
		cw.lg.Warn("config file unreadable; waiting for the next change", zap.String("path", cw.path), zap.Error(err))
		return
	}
	if sum == cw.last {
		return
	}
	cw.last = sum
	cw.lg.Info("config file changed; reloading", zap.String("path", cw.path))
	cw.onChange()
}

// Close ends the watch; Run then returns. Safe to call more than once.
func (cw *Watcher) Close() { _ = cw.w.Close() }

// digest is the SHA-256 of the file at path.
func digest(path string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
