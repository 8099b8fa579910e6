package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// oPath opens a file for fstat only, without reading it (Stat uses it, so a
// symbolic link or an unreadable file can still be described).
const oPath = unix.O_PATH

// open opens rel (a valid path, or "." for the root) beneath the root and
// returns the descriptor, which the caller closes.
// follow says whether a final symbolic link is followed; flags must carry
// O_NOFOLLOW when it is not.
func (b *Backend) open(rel string, flags int, follow bool) (int, error) {
	flags |= unix.O_CLOEXEC
	if !b.noOpenat2.Load() {
		fd, err := b.openat2(rel, flags)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			b.noOpenat2.Store(true)
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EAGAIN):
			// An escape, an absolute symbolic link, or a concurrent rename:
			// let the resolving fallback decide.
		default:
			return -1, err
		}
	}
	return b.openResolved(rel, flags, follow)
}

// openat2 opens rel relative to the root descriptor; the kernel refuses any
// resolution that leaves the root.
func (b *Backend) openat2(rel string, flags int) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	var fd int
	var oerr error
	cerr := b.rootConn.Control(func(root uintptr) {
		for {
			fd, oerr = unix.Openat2(int(root), rel, how)
			if oerr != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return -1, cerr
	}
	if oerr != nil {
		return -1, oerr
	}
	return fd, nil
}

// openResolved resolves rel's symbolic links in user space, checks that the
// result is inside the root, and opens it. Between the check and the open a
// rename could redirect the path; openat2 is preferred for that reason.
func (b *Backend) openResolved(rel string, flags int, follow bool) (int, error) {
	if b.closed.Load() {
		return -1, os.ErrClosed
	}
	full := filepath.Join(b.rootReal, filepath.FromSlash(rel))
	var real string
	switch {
	case follow:
		r, err := filepath.EvalSymlinks(full)
		if err != nil {
			return -1, err
		}
		real = r
	case rel == ".":
		real = b.rootReal
	default:
		dir, err := filepath.EvalSymlinks(filepath.Dir(full))
		if err != nil {
			return -1, err
		}
		real = filepath.Join(dir, filepath.Base(full))
	}
	if !inside(b.rootReal, real) {
		return -1, errOutside
	}
	for {
		fd, err := unix.Open(real, flags|unix.O_NOFOLLOW, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, err
		}
		return fd, nil
	}
}

// inside reports whether the clean absolute path p is root or below it.
func inside(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// openDir opens the directory rel beneath the root.
func (b *Backend) openDir(rel string) (*os.File, error) {
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, true)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}
