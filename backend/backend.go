// Package backend defines the read-only storage contract that every stallfs
// source implements (a local directory, Azure Blob, S3), the errors it
// returns, and wrappers that throttle or inject faults for tests and
// benchmarks.
//
// Paths are slash-separated and relative to the source root, without a
// leading slash; the root itself is "". Errors belong to the io/fs family:
// a missing object satisfies errors.Is(err, fs.ErrNotExist), and an object
// that changed since its version was taken satisfies errors.Is(err,
// ErrStale). SDK errors are translated inside each backend; nothing above a
// backend matches error strings.
package backend

import (
	"context"
	"errors"
	iofs "io/fs"
	"time"
)

// ErrStale reports that an object no longer has the version a read asked
// for: it was replaced or modified. A read that sees it returns no bytes of
// either version.
var ErrStale = errors.New("object changed since it was listed")

// ErrThrottled reports that the store refused a request for load (HTTP 429
// or 503). Backends retry it themselves; it surfaces only when retries are
// exhausted.
var ErrThrottled = errors.New("storage throttled the request")

// Entry describes one object or directory of a source.
type Entry struct {
	// Name is the base name (no slash). For Stat of the root it is "".
	Name string
	// Mode holds the type bits (iofs.ModeDir, iofs.ModeSymlink, or none for
	// a regular file) and the permission bits as the source reports them.
	Mode iofs.FileMode
	// Size is the length in bytes of a regular file; 0 for directories.
	Size int64
	// ModTime is the last modification time reported by the source.
	ModTime time.Time
	// Version identifies the content: the ETag for object stores, size and
	// mtime in nanoseconds for local files. Two entries with the same path
	// and version have the same bytes. Empty for directories.
	Version string
	// Target is the link target when Mode has iofs.ModeSymlink.
	Target string
}

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return e.Mode.IsDir() }

// Backend is a read-only view of a tree of objects.
//
// Implementations must be safe for concurrent use.
type Backend interface {
	// List returns the entries of directory dir, sorted by name (byte
	// order). A missing directory returns an error satisfying
	// fs.ErrNotExist; a path naming a file returns an error too.
	List(ctx context.Context, dir string) ([]Entry, error)

	// Stat returns the entry at path.
	Stat(ctx context.Context, path string) (Entry, error)

	// ReadAt reads len(p) bytes of the object at path, of the given
	// version, starting at byte off. It follows io.ReaderAt: n < len(p)
	// only together with a non-nil error, and io.EOF when the object ends
	// before p is full. If the object's version is no longer version it
	// returns ErrStale (wrapped) and the contents of p are unspecified.
	ReadAt(ctx context.Context, path, version string, p []byte, off int64) (n int, err error)

	// String names the source for logs and cache namespaces
	// (e.g. "file:///data/imagenet", "s3://bucket/prefix"). It never
	// contains credentials.
	String() string

	// Close releases connections and other resources.
	Close() error
}

// Walker is implemented by backends that can list a whole subtree in one
// pass, faster than directory by directory (object stores list flat).
// Callers check for it with a type assertion and fall back to List.
type Walker interface {
	// Walk calls fn for every entry below dir (not dir itself), in any
	// order, with path relative to the source root. If fn returns an
	// error the walk stops and returns it.
	Walk(ctx context.Context, dir string, fn func(path string, e Entry) error) error
}
