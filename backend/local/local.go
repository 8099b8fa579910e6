package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/backend"
)

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Walker  = (*Backend)(nil)
)

// errOutside reports a path whose symbolic links resolve outside the root.
var errOutside = fmt.Errorf("resolves outside the backend root: %w", iofs.ErrNotExist)

// errSpecial reports a device, named pipe or socket.
var errSpecial = fmt.Errorf("not a regular file, directory or symlink: %w", iofs.ErrNotExist)

// Backend is a directory on the local disk. It is safe for concurrent use.
type Backend struct {
	// immutable after New
	rootPath string   // absolute, as given (after filepath.Abs)
	rootReal string   // rootPath with its symbolic links resolved
	rootDir  *os.File // the root directory; openat2 resolves beneath it
	rootConn syscall.RawConn

	// noOpenat2 is set once openat2 turns out to be unavailable, and by
	// tests to exercise the fallback.
	noOpenat2 atomic.Bool
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// testHookAfterRead, when set by a test, runs between the pread and the
	// second version check.
	testHookAfterRead func(path string)
}

// New returns a backend serving the directory root. root must exist and be
// a directory: a missing root returns an error satisfying iofs.ErrNotExist,
// a root that is not a directory one satisfying syscall.ENOTDIR.
func New(root string) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local backend %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local backend: %w", &iofs.PathError{Op: "open", Path: abs, Err: syscall.ENOTDIR})
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	dir, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	rc, err := dir.SyscallConn()
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("local backend %s: %w", abs, err)
	}
	return &Backend{rootPath: abs, rootReal: real, rootDir: dir, rootConn: rc}, nil
}

// String returns "file://" followed by the absolute root.
func (b *Backend) String() string { return "file://" + b.rootPath }

// Close releases the descriptor of the root. Operations after Close fail.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.closeErr = b.rootDir.Close()
	})
	return b.closeErr
}

// Stat returns the entry at path without following a final symbolic link.
func (b *Backend) Stat(ctx context.Context, path string) (backend.Entry, error) {
	rel, err := b.check(ctx, "stat", path)
	if err != nil {
		return backend.Entry{}, err
	}
	fd, err := b.open(rel, oPath|unix.O_NOFOLLOW, false)
	if err != nil {
		return backend.Entry{}, pathErr("stat", path, err)
	}
	defer unix.Close(fd)
	name := ""
	if rel != "." {
		name = rel[strings.LastIndexByte(rel, '/')+1:]
	}
	e, err := entryOfFd(fd, name)
	if err != nil {
		return backend.Entry{}, pathErr("stat", path, err)
	}
	return e, nil
}

// List returns the entries of directory dir sorted by name. Symbolic links
// in dir's own path are followed while they stay inside the root.
func (b *Backend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	rel, err := b.check(ctx, "list", dir)
	if err != nil {
		return nil, err
	}
	f, err := b.openDir(rel)
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	defer f.Close()
	entries, err := readDir(ctx, f)
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	return entries, nil // readDir sorts by name
}

// ReadAt reads from the regular file at path (following symbolic links that
// stay inside the root) if it still has the given version.
func (b *Backend) ReadAt(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	rel, err := b.check(ctx, "read", path)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &iofs.PathError{Op: "read", Path: path, Err: fmt.Errorf("negative offset %d: %w", off, iofs.ErrInvalid)}
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer (it is then
	// refused as not a regular file); regular files ignore the flag.
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_NONBLOCK, true)
	if err != nil {
		return 0, pathErr("read", path, err)
	}
	defer unix.Close(fd)
	if err := checkVersion(fd, version); err != nil {
		return 0, pathErr("read", path, err)
	}
	n, rerr := pread(ctx, fd, p, off)
	if rerr != nil && rerr != io.EOF {
		return n, pathErr("read", path, rerr)
	}
	if b.testHookAfterRead != nil {
		b.testHookAfterRead(path)
	}
	// The bytes just read belong to version only if the file still has it.
	if err := checkVersion(fd, version); err != nil {
		return 0, pathErr("read", path, err)
	}
	return n, rerr
}

// preadStep bounds one pread so that cancellation is seen between steps of
// a large read.
const preadStep = 4 << 20

// pread fills p from fd at off, returning io.EOF if the file ends first.
func pread(ctx context.Context, fd int, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := unix.Pread(fd, p[n:min(len(p), n+preadStep)], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// check refuses work after Close or on a done context and turns a backend
// path into a path for openat ("." for the root).
func (b *Backend) check(ctx context.Context, op, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &iofs.PathError{Op: op, Path: path, Err: err}
	}
	if b.closed.Load() {
		return "", &iofs.PathError{Op: op, Path: path, Err: iofs.ErrClosed}
	}
	if path == "" {
		return ".", nil
	}
	if !iofs.ValidPath(path) {
		return "", &iofs.PathError{Op: op, Path: path, Err: iofs.ErrInvalid}
	}
	return path, nil
}

// pathErr wraps err as a *iofs.PathError for path, replacing the absolute
// path of an underlying PathError with the backend path.
func pathErr(op, path string, err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &iofs.PathError{Op: op, Path: path, Err: err}
}

// checkVersion fstats fd and returns an error wrapping backend.ErrStale if it
// is not a regular file of the given version.
func checkVersion(fd int, version string) error {
	e, err := entryOfFd(fd, "")
	if err != nil {
		return err
	}
	if e.Mode.IsDir() {
		return syscall.EISDIR
	}
	if e.Version != version {
		return fmt.Errorf("%w: version %s, now %s", backend.ErrStale, version, e.Version)
	}
	return nil
}
