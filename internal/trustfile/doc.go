// Package trustfile opens the files whose content the relay acts on
// without trusting the file system: the config file (config.Load, the
// config_watch watcher) and the warm-restart snapshot (internal/snapshot).
// Anyone who can write such a file makes the relay do what they wrote, and
// a path can hold anything: a FIFO (open blocks until a writer comes), a
// device, a file of any size.
//
// Words, as this package uses them:
//   - trusted: a regular file, owned by the relay's own user, that nobody
//     else may write; for a file an operator writes (OperatorWritten), root
//     may own it and its group may write it too. What is checked is the
//     opened file (fstat), so what is checked is what is read.
//   - bound: the most bytes read of a trusted file (maxBytes); a larger file
//     is refused without being read (its size), and a file that grows while
//     read is refused at maxBytes+1, so memory never depends on the file.
//
// Opening never blocks: O_NONBLOCK, then fstat; a FIFO or a device is
// refused before anything is read.
package trustfile
