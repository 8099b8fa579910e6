package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly answers every mutating operation with EROFS. The mount is also
// made read-only in the kernel ("ro"), which refuses most of them before
// they reach us; these are the second line, and the answer go-fuse would
// otherwise give (ENOTSUP, or success for unlink) would be wrong.
type readOnly struct{}

var (
	_ = (gofs.NodeSetattrer)((*readOnly)(nil))
	_ = (gofs.NodeSetxattrer)((*readOnly)(nil))
	_ = (gofs.NodeRemovexattrer)((*readOnly)(nil))
	_ = (gofs.NodeListxattrer)((*readOnly)(nil))
)

func (readOnly) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.EROFS
}

// Listxattr lists nothing: the dataset has no extended attributes, and the
// control attribute stays unlisted.
func (readOnly) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, 0
}

func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (d *dirNode) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
