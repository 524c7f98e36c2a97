// Package configwatch notices that the relay's config file changed and
// says so, once per change: the relay then reloads it (config_watch).
//
// A config file is replaced in more ways than it is written: config
// management and editors write a new file and rename it over the old one;
// Kubernetes mounts a ConfigMap as a symlink (config.yaml → ..data/
// config.yaml) and updates it by pointing the ..data symlink at a new
// directory; a file bind-mounted into a container is written in place. So
// the Watcher watches the file's directory (renames, symlink swaps) and
// the file itself (in-place writes, which a bind mount shows only on the
// file), waits until the file's own events (ownNames: the path and the
// entries its symlinks go through; not a log beside it) have been quiet
// for a short while (Debounce: one swap is many events), and compares the
// file's content (SHA-256 of what the path resolves to) with what it saw
// last: only a different content is a change. The file is read as config.Load reads it
// (internal/trustfile: never blocks, bounded, owner and mode); a file
// refused for what it is counts as a change once per reason, so the
// reload refuses it loudly. A file that cannot be read (half swapped) is
// waited past; the next event looks again.
//
// Words: a change is a new content at the path; the watcher does not
// parse, validate or apply anything (internal/relay's Reload does).
package configwatch
