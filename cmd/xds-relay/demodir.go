package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The demo's temporary directory: its resources, config and bootstraps,
// removed when the demo stops. A demo killed (SIGKILL, OOM) cannot remove
// its own, so each demo, at start, removes those of demos no longer
// running: a running demo keeps an exclusive flock on its directory's
// lock file as long as it lives, and the kernel drops it when the process
// dies, however it dies.
const (
	demoDirPrefix = "xds-relay-demo-"
	demoLockFile  = "demo.lock"
)

// makeDemoDir removes the directories of dead demos, then creates this
// demo's, locked; cleanup unlocks and removes it.
func makeDemoDir() (dir string, cleanup func(), err error) {
	removeDeadDemoDirs(os.TempDir())
	dir, err = os.MkdirTemp("", demoDirPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("demo: %w", err)
	}
	lock, err := lockDemoDir(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() {
		os.RemoveAll(dir)
		lock.Close()
	}, nil
}

// lockDemoDir creates dir's lock file already locked (locked under another
// name, then renamed: a sweeper never finds it unlocked).
func lockDemoDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, demoLockFile+".new")
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("demo: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("demo: lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, demoLockFile)); err != nil {
		f.Close()
		return nil, fmt.Errorf("demo: lock file: %w", err)
	}
	return f, nil
}

// removeDeadDemoDirs removes every demo directory in tmp whose lock file
// nobody has locked: its demo is dead. Directories without a lock file (being
// created, or not a demo's) are left alone; nothing here is worth failing
// the demo for.
func removeDeadDemoDirs(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, demoDirPrefix+"*")) // the pattern is valid
	for _, d := range dirs {
		f, err := os.OpenFile(filepath.Join(d, demoLockFile), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		// Locked by us: its demo is dead, and no other sweeper is removing
		// it. Otherwise (EWOULDBLOCK: alive; any other error: cannot tell)
		// it stays.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(d)
		}
		f.Close()
	}
}
