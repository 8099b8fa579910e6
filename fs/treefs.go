package fs

import (
	"errors"
	"io"
	iofs "io/fs"
	"slices"
	"time"
)

// TreeFS returns the dataset's tree as a read-only io/fs.FS (also
// ReadDirFS and StatFS), answered from memory with no backend calls. It
// serves metadata only: Read on a file returns an error. Modes are the
// mount's (write bits removed); for a regular file, FileInfo.Sys returns
// its ID (uint32). Symlinks are reported as symlinks and not followed.
func (m *Mount) TreeFS() iofs.FS { return treeFS{m: m} }

type treeFS struct{ m *Mount }

var (
	_ iofs.ReadDirFS = treeFS{}
	_ iofs.StatFS    = treeFS{}
)

// errMetadataOnly is returned by Read on a TreeFS file.
var errMetadataOnly = errors.New("stallfs TreeFS serves metadata only")

func (f treeFS) resolve(op, name string) (uint32, error) {
	if !iofs.ValidPath(name) {
		return 0, &iofs.PathError{Op: op, Path: name, Err: iofs.ErrInvalid}
	}
	e, ok := f.m.tree.lookupPath(name)
	if !ok {
		return 0, &iofs.PathError{Op: op, Path: name, Err: iofs.ErrNotExist}
	}
	return e, nil
}

func (f treeFS) Open(name string) (iofs.File, error) {
	e, err := f.resolve("open", name)
	if err != nil {
		return nil, err
	}
	return &treeFile{fs: f, ent: e, name: name}, nil
}

func (f treeFS) Stat(name string) (iofs.FileInfo, error) {
	e, err := f.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(e), nil
}

func (f treeFS) ReadDir(name string) ([]iofs.DirEntry, error) {
	e, err := f.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if !f.m.tree.ents[e].mode.IsDir() {
		return nil, &iofs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	d := f.m.tree.dirs[f.m.tree.ents[e].ref]
	out := make([]iofs.DirEntry, 0, d.count)
	for i := d.first; i < d.first+d.count; i++ {
		out = append(out, iofs.FileInfoToDirEntry(f.info(i)))
	}
	return out, nil
}

func (f treeFS) info(e uint32) treeInfo {
	ent := &f.m.tree.ents[e]
	mode := ent.mode
	switch {
	case mode.IsDir():
		mode = iofs.ModeDir | 0o555 | mode.Perm()&^0o222
	case mode.IsRegular():
		mode = 0o444 | mode.Perm()&^0o222
	}
	name := f.m.tree.name(e)
	if e == 0 {
		name = "."
	}
	return treeInfo{name: name, size: ent.size, mode: mode, mtime: ent.mtime, id: ent.ref}
}

// treeInfo is the FileInfo of a tree entry.
type treeInfo struct {
	name  string
	size  int64
	mode  iofs.FileMode
	mtime int64
	id    uint32
}

func (i treeInfo) Name() string        { return i.name }
func (i treeInfo) Size() int64         { return i.size }
func (i treeInfo) Mode() iofs.FileMode { return i.mode }
func (i treeInfo) ModTime() time.Time  { return time.Unix(0, i.mtime) }
func (i treeInfo) IsDir() bool         { return i.mode.IsDir() }
func (i treeInfo) String() string      { return iofs.FormatFileInfo(i) }
func (i treeInfo) Sys() any {
	if i.mode.IsRegular() {
		return i.id
	}
	return nil
}

// treeFile is an open TreeFS name; directories list through ReadDir.
type treeFile struct {
	fs   treeFS
	ent  uint32
	name string
	pos  int // next child for ReadDir(n > 0)
}

var _ iofs.ReadDirFile = (*treeFile)(nil)

func (t *treeFile) Stat() (iofs.FileInfo, error) { return t.fs.info(t.ent), nil }

func (t *treeFile) Read([]byte) (int, error) {
	return 0, &iofs.PathError{Op: "read", Path: t.name, Err: errMetadataOnly}
}

func (t *treeFile) Close() error { return nil }

func (t *treeFile) ReadDir(n int) ([]iofs.DirEntry, error) {
	all, err := t.fs.ReadDir(t.name)
	if err != nil {
		return nil, err
	}
	rest := all[min(t.pos, len(all)):]
	if n <= 0 {
		t.pos = len(all)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(n, len(rest))]
	t.pos += len(rest)
	return slices.Clip(rest), nil
}
