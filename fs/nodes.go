package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Inode numbers are stable across lookups and mounts of the same tree:
// directories from their index (the root is 1), regular files from their
// ID, symlinks from their index, each kind in its own range.
func dirIno(d uint32) uint64   { return 1 + uint64(d) }
func fileIno(id uint32) uint64 { return 1<<32 + uint64(id) }
func linkIno(l uint32) uint64  { return 2<<32 + uint64(l) }

// blockSize is the st_blksize reported for files: stdio and Python size
// their buffered reads by it, and a FUSE read can carry 1 MiB.
const blockSize = 128 << 10

// fillAttr describes tree entry e.
func (m *Mount) fillAttr(e uint32, a *fuse.Attr) {
	ent := &m.tree.ents[e]
	sec, nsec := uint64(ent.mtime/1e9), uint32(ent.mtime%1e9)
	if ent.mtime < 0 {
		sec, nsec = 0, 0
	}
	a.Mtime, a.Mtimensec = sec, nsec
	a.Atime, a.Atimensec = sec, nsec
	a.Ctime, a.Ctimensec = sec, nsec
	a.Uid, a.Gid = m.uid, m.gid
	a.Blksize = blockSize
	perm := uint32(ent.mode.Perm()) &^ 0o222
	switch {
	case ent.mode.IsDir():
		a.Mode = syscall.S_IFDIR | 0o555 | perm
		a.Nlink = 2 + m.tree.dirs[ent.ref].nsub
		a.Ino = dirIno(ent.ref)
		a.Size = 4096
		a.Blocks = 8
	case ent.mode.IsRegular():
		a.Mode = syscall.S_IFREG | 0o444 | perm
		a.Nlink = 1
		a.Ino = fileIno(ent.ref)
		a.Size = uint64(ent.size)
		a.Blocks = (a.Size + 511) / 512
	default:
		a.Mode = syscall.S_IFLNK | 0o777
		a.Nlink = 1
		a.Ino = linkIno(ent.ref)
		a.Size = uint64(m.tree.links[ent.ref].n)
	}
}

// statfs reports the dataset as a full, read-only file system.
func (m *Mount) statfs(out *fuse.StatfsOut) syscall.Errno {
	const bsize = 4096
	out.Bsize = bsize
	out.Frsize = bsize
	out.Blocks = uint64((m.tree.bytes + bsize - 1) / bsize)
	out.Files = uint64(len(m.tree.ents))
	out.NameLen = 255
	return 0
}

// dirNode is a directory of the dataset.
type dirNode struct {
	gofs.Inode
	readOnly
	m   *Mount
	dir uint32
}

var (
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeStatfser)((*dirNode)(nil))
	_ = (gofs.NodeGetxattrer)((*dirNode)(nil))
	_ = (gofs.NodeMkdirer)((*dirNode)(nil))
	_ = (gofs.NodeMknoder)((*dirNode)(nil))
	_ = (gofs.NodeLinker)((*dirNode)(nil))
	_ = (gofs.NodeSymlinker)((*dirNode)(nil))
	_ = (gofs.NodeCreater)((*dirNode)(nil))
	_ = (gofs.NodeTmpfiler)((*dirNode)(nil))
	_ = (gofs.NodeUnlinker)((*dirNode)(nil))
	_ = (gofs.NodeRmdirer)((*dirNode)(nil))
	_ = (gofs.NodeRenamer)((*dirNode)(nil))
)

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	e, ok := d.m.tree.lookup(d.dir, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	d.m.fillAttr(e, &out.Attr)
	ent := &d.m.tree.ents[e]
	var node gofs.InodeEmbedder
	switch {
	case ent.mode.IsDir():
		node = &dirNode{m: d.m, dir: ent.ref}
	case ent.mode.IsRegular():
		if d.m.kc != nil {
			// Kernel-cache mode: files get their own entry timeout
			// (go-fuse has none set then), and the LOOKUP of a known
			// file acts on its node, which holds the page state.
			out.SetEntryTimeout(d.m.fileEntryTimeout())
			if ch := d.GetChild(name); ch != nil {
				if f, ok := ch.Operations().(*fileNode); ok && f.ent == e {
					if d.m.kc.noOpen() {
						f.lookedUp()
					}
					return ch, 0
				}
			}
			f := d.m.newFileNode(ent.ref)
			if d.m.kc.noOpen() {
				f.lookedUp()
			}
			node = f
		} else {
			node = d.m.newFileNode(ent.ref)
		}
	default:
		node = &linkNode{m: d.m, ent: e}
	}
	if d.m.kc != nil && !ent.mode.IsRegular() {
		out.SetEntryTimeout(d.m.opts.EntryTimeout)
	}
	return d.NewInode(ctx, node, gofs.StableAttr{Mode: out.Attr.Mode & syscall.S_IFMT, Ino: out.Attr.Ino}), 0
}

func (d *dirNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.fillAttr(d.m.tree.dirs[d.dir].ent, &out.Attr)
	return 0
}

func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.m.statfs(out)
}

// ControlXattr is the extended attribute of a mount's root directory that
// holds the path of its control socket. It is not listed, so the dataset's
// listing and its xattrs stay exactly the source's.
const ControlXattr = "user.stallfs.control"

func (d *dirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if d.dir != 0 || attr != ControlXattr {
		return 0, syscall.ENODATA
	}
	v := d.m.ctl.path
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// fileNode is a regular file of the dataset.
type fileNode struct {
	gofs.Inode
	readOnly
	m   *Mount
	ent uint32
	ref fileRef
	kc  *kcNode // kernel-cache mode only
}

var (
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
	_ = (gofs.NodeFlusher)((*fileNode)(nil))
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeStatfser)((*fileNode)(nil))
	_ = (gofs.NodeGetxattrer)((*fileNode)(nil))
	_ = (gofs.NodeWriter)((*fileNode)(nil))
	_ = (gofs.NodeAllocater)((*fileNode)(nil))
)

func (m *Mount) newFileNode(id uint32) *fileNode {
	f := &fileNode{m: m, ent: m.tree.fileEnt[id], ref: m.fileRef(id)}
	if m.kc != nil {
		f.kc = &kcNode{}
	}
	return f
}

func (f *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.m.fillAttr(f.ent, &out.Attr)
	return 0
}

func (f *fileNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return f.m.statfs(out)
}

func (f *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}

// Open refuses any access that could write; each open gets its own
// readahead state and direct I/O. In kernel-cache mode it answers the
// first read-only OPEN with ENOSYS, deliberately (the one ENOSYS of the
// file system, outside toErrno): the kernel then opens every file of the
// connection without asking, keeps their pages (FOPEN_KEEP_CACHE) and
// sends READs without a handle.
func (f *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	if f.m.kc.noOpen() {
		return nil, 0, syscall.ENOSYS
	}
	if f.m.observer != nil {
		f.m.observer.Observe(f.ref.path)
	}
	return &fileHandle{f: f, seq: newSeqState()}, fuse.FOPEN_DIRECT_IO, 0
}

// Flush has nothing to write back. In kernel-cache mode it answers ENOSYS
// so that the kernel stops sending FLUSH on every close.
func (f *fileNode) Flush(ctx context.Context, fh gofs.FileHandle) syscall.Errno {
	if f.m.kc.noOpen() {
		return syscall.ENOSYS
	}
	return 0
}

// Read serves reads with a handle (direct I/O), and without one in
// kernel-cache mode.
func (f *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h, ok := fh.(*fileHandle); ok {
		return h.Read(ctx, dest, off)
	}
	if f.kc != nil {
		return f.readNoHandle(ctx, dest, off)
	}
	return f.read(ctx, nil, dest, off)
}

func (f *fileNode) read(ctx context.Context, seq *seqState, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := f.m.rd.read(ctx, &f.ref, seq, dest, off)
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *fileNode) Write(ctx context.Context, fh gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

func (f *fileNode) Allocate(ctx context.Context, fh gofs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EROFS
}

// fileHandle is one open of a regular file.
type fileHandle struct {
	f   *fileNode
	seq *seqState
}

var _ = (gofs.FileReader)((*fileHandle)(nil))

func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.f.read(ctx, h.seq, dest, off)
}

// linkNode is a symbolic link of the dataset, shown as a link; the kernel
// resolves its target like any other link.
type linkNode struct {
	gofs.Inode
	readOnly
	m   *Mount
	ent uint32
}

var (
	_ = (gofs.NodeReadlinker)((*linkNode)(nil))
	_ = (gofs.NodeGetattrer)((*linkNode)(nil))
	_ = (gofs.NodeGetxattrer)((*linkNode)(nil))
)

func (l *linkNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(l.m.tree.str(l.m.tree.links[l.m.tree.ents[l.ent].ref])), 0
}

func (l *linkNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.m.fillAttr(l.ent, &out.Attr)
	return 0
}

func (l *linkNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}
