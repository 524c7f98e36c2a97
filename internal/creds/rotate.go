package creds

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// rotating serves a value loaded from files (a CA pool, a certificate
// pair, a bearer token) and loads it again when any of the files' size or
// modification time changes, so a file rotated by rename is used by the
// next connection or stream without a restart. A file that no longer
// stats or loads (say, a half-written one) is reported to onError and the
// value loaded before stays in use. Safe for concurrent use.
type rotating[T any] struct {
	files   []string          // read-only after newRotating
	load    func() (T, error) // read-only after newRotating
	onError func(error)       // read-only after newRotating; may be nil
	// statFailed makes the error for a file that does not stat (loaded:
	// whether a value is kept), loadFailed the one reported for files that
	// stat but do not load again. Read-only after newRotating.
	statFailed func(err error, loaded bool) error
	loadFailed func(error) error

	mu     sync.Mutex  // guards the fields below; never locked during I/O
	val    T           // guarded by mu
	stamps []fileStamp // guarded by mu: the files' stamps when val was loaded
}

// fileStamp is what tells a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// newRotating loads the value now: files that do not stat or load are an
// error (statFailed's or load's).
func newRotating[T any](files []string, load func() (T, error), onError func(error),
	statFailed func(err error, loaded bool) error, loadFailed func(error) error) (*rotating[T], error) {
	f := &rotating[T]{files: files, load: load, onError: onError, statFailed: statFailed, loadFailed: loadFailed}
	stamps, err := f.stat()
	if err != nil {
		return nil, statFailed(err, false)
	}
	val, err := load()
	if err != nil {
		return nil, err
	}
	f.val, f.stamps = val, stamps
	return f, nil
}

func (f *rotating[T]) stat() ([]fileStamp, error) {
	stamps := make([]fileStamp, len(f.files))
	for i, file := range f.files {
		fi, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		stamps[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return stamps, nil
}

// current returns the value, loading it again if a file changed.
func (f *rotating[T]) current() T {
	stamps, statErr := f.stat()
	f.mu.Lock()
	val := f.val
	changed := false
	for i := range stamps {
		changed = changed || !stamps[i].mod.Equal(f.stamps[i].mod) || stamps[i].size != f.stamps[i].size
	}
	f.mu.Unlock()
	if statErr != nil {
		f.report(f.statFailed(statErr, true))
		return val
	}
	if !changed {
		return val
	}
	fresh, err := f.load()
	if err != nil {
		f.report(f.loadFailed(err))
		return val
	}
	f.mu.Lock()
	f.val, f.stamps = fresh, stamps
	f.mu.Unlock()
	return fresh
}

func (f *rotating[T]) report(err error) {
	if f.onError != nil {
		f.onError(err)
	}
}

// unwrapPathError shows an *os.PathError as "path: cause" (without the
// operation), as config's validation does.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
