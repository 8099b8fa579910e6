package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/stallfs/stallfs/backend"
)

func TestToErrno(t *testing.T) {
	cases := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{iofs.ErrNotExist, syscall.ENOENT},
		{&iofs.PathError{Op: "open", Path: "x", Err: iofs.ErrNotExist}, syscall.ENOENT},
		{fmt.Errorf("list: %w", os.ErrNotExist), syscall.ENOENT},
		{iofs.ErrPermission, syscall.EACCES},
		{fmt.Errorf("get: %w", iofs.ErrPermission), syscall.EACCES},
		{context.Canceled, syscall.EINTR},
		{fmt.Errorf("read: %w", context.Canceled), syscall.EINTR},
		{backend.ErrStale, syscall.EIO},
		{fmt.Errorf("read a@0: %w", backend.ErrStale), syscall.EIO},
		{backend.ErrThrottled, syscall.EIO},
		{context.DeadlineExceeded, syscall.EIO},
		{errors.New("something else"), syscall.EIO},
		{syscall.EROFS, syscall.EROFS},
		{fmt.Errorf("wrapped: %w", syscall.ENOENT), syscall.ENOENT},
		{syscall.ENOSYS, syscall.EIO}, // never ENOSYS
		{fmt.Errorf("x: %w", syscall.ENOSYS), syscall.EIO},
		{errClosed, syscall.EIO},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), syscall.EIO}, // transport errnos mean nothing to a reader
		{&os.SyscallError{Syscall: "read", Err: syscall.ETIMEDOUT}, syscall.EIO},
	}
	for _, tc := range cases {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
