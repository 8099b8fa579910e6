package fs

// Directory listings. The tree never changes while mounted and a
// directory's children are contiguous and sorted in it, so a listing is
// the range ents[first : first+count] and a READDIR offset is simply an
// index into it: entry i carries offset i+1 (the position after it), and a
// READDIR at any offset starts there without replaying the entries before
// it. The kernel caches listings (FOPEN_CACHE_DIR and FOPEN_KEEP_CACHE on
// every OPENDIR), so a directory is read from the daemon once per mount
// unless memory pressure drops the kernel's copy.
//
// READDIRPLUS is off for every mount (Mount's gofs options): it would look
// up every listed entry and give each its own go-fuse node (1.28M nodes,
// ~800 MiB and 100x the time of `find` on the source, docs/scale.md),
// while a plain READDIR already carries the type that `find -type` and
// os.ReadDir need.

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var _ = (gofs.NodeOpendirHandler)((*dirNode)(nil))

// OpendirHandle opens a listing of the directory that the kernel may keep
// (and reuse across opens): the tree is immutable.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rec := d.m.tree.dirs[d.dir]
	h := &dirHandle{m: d.m, first: rec.first, count: rec.count}
	return h, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// dirHandle is one open of a directory: a position in its range of tree
// entries. go-fuse serialises the calls on one handle.
type dirHandle struct {
	m            *Mount
	first, count uint32
	pos          uint32 // index (0..count) of the next child to list
	de           fuse.DirEntry
}

var (
	_ = (gofs.FileReaddirenter)((*dirHandle)(nil))
	_ = (gofs.FileSeekdirer)((*dirHandle)(nil))
	_ = (gofs.FileReleasedirer)((*dirHandle)(nil))
)

// Readdirent returns the next child, or nil at the end. The entry is
// valid until the next call (go-fuse copies it at once).
func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if h.pos >= h.count {
		return nil, 0
	}
	e := h.first + h.pos
	h.pos++
	h.de = h.m.direntOf(e)
	h.de.Off = uint64(h.pos)
	return &h.de, 0
}

// Seekdir moves to offset off: the child after the one that carried off,
// the first child for 0. An offset past the end lists nothing.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.pos = uint32(min(off, uint64(h.count)))
	return 0
}

// Releasedir has nothing to free: the handle holds no resources.
func (h *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {}

// direntOf is entry e as READDIR shows it: name, type and inode number
// (the same as fillAttr's, without the rest of the attributes).
func (m *Mount) direntOf(e uint32) fuse.DirEntry {
	ent := &m.tree.ents[e]
	de := fuse.DirEntry{Name: m.tree.str(ent.name)}
	switch {
	case ent.mode.IsDir():
		de.Mode, de.Ino = syscall.S_IFDIR, dirIno(ent.ref)
	case ent.mode.IsRegular():
		de.Mode, de.Ino = syscall.S_IFREG, fileIno(ent.ref)
	default:
		de.Mode, de.Ino = syscall.S_IFLNK, linkIno(ent.ref)
	}
	return de
}
