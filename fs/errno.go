package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"syscall"

	"github.com/stallfs/stallfs/backend"
)

// toErrno is the one place where an error becomes an errno. Unknown errors
// are EIO, never ENOSYS: the kernel takes ENOSYS as "operation not
// implemented" and stops sending that operation for the whole mount.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	if errors.Is(err, backend.ErrStale) {
		return syscall.EIO
	}
	// Only errnos that mean the same to the reader pass through; a
	// network errno from a backend's transport (ECONNREFUSED, ETIMEDOUT)
	// would make no sense to a reader of a file: it becomes EIO.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT, syscall.EACCES, syscall.EPERM, syscall.EINTR, syscall.EROFS,
			syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, syscall.EINVAL:
			return errno
		}
		return syscall.EIO
	}
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}
