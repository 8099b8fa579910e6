package fs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stallfs/stallfs/backend"
)

// Options configures a mount. The zero value works.
type Options struct {
	// KernelCache lets the kernel page cache keep file data. Off by
	// default: file data is served with direct I/O so the kernel's LRU
	// never decides what stays cached.
	KernelCache bool
	// AllowOther lets users other than the mounter access the mount.
	AllowOther bool
	// ReadAhead is the kernel's maximum readahead in bytes (0: default).
	ReadAhead int64
	// EntryTimeout and AttrTimeout are how long the kernel may cache names
	// and attributes (0: one hour; the dataset does not change during a run).
	EntryTimeout, AttrTimeout time.Duration
	// ChunkSize is the size of a cache item of a large file (0: 4 MiB).
	ChunkSize int64
	// FsName is shown in /proc/mounts as the source (0: backend String()).
	FsName string
	// Logger receives the mount's logs (nil: discard).
	Logger *slog.Logger
	// Debug logs every FUSE request.
	Debug bool
}

// Mount is a mounted stallfs file system.
type Mount struct{}

// New mounts b read-only at mountpoint and returns once the kernel serves
// the mount. ctx bounds the mount's setup only; the mount lives until
// Unmount.
func New(ctx context.Context, mountpoint string, b backend.Backend, opts Options) (*Mount, error) {
	return nil, errors.New("fs: not implemented yet")
}

// Wait blocks until the file system is unmounted.
func (m *Mount) Wait() {}

// Unmount unmounts the file system and releases its resources.
func (m *Mount) Unmount() error { return errors.New("fs: not implemented yet") }
