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
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 && errno != syscall.ENOSYS {
		return errno
	}
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, iofs.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}
