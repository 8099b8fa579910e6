package fs

import (
	"cmp"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stallfs/stallfs/backend"
)

// The tree is the whole dataset's metadata, built once at mount and never
// changed. It is kept pointer-free apart from the string arena and the
// slices themselves, so the garbage collector does not scan a million
// entries: every name, version and link target is a slice of one arena
// string, named by an sref.
//
// Layout: ents holds every entry; the children of each directory are
// contiguous in ents and sorted by name (byte order), so a lookup is a
// binary search over the directory's range. ents[0] is the root.

// sref names a substring of the tree's arena.
type sref struct{ off, n uint32 }

// entry is one name of the dataset.
type entry struct {
	name   sref
	size   int64 // regular files only
	mtime  int64 // unix nanoseconds
	mode   iofs.FileMode
	parent uint32 // dir index of the containing directory (root: 0)
	ref    uint32 // file ID, dir index or link index, by type
}

// dirRec is one directory: its own entry and the range of its children.
type dirRec struct {
	ent          uint32
	first, count uint32 // children are ents[first : first+count]
	nsub         uint32 // number of child directories (for nlink)
}

type tree struct {
	strs    string
	ents    []entry
	dirs    []dirRec
	fileEnt []uint32 // file ID -> entry index
	fileVer []sref   // file ID -> version
	links   []sref   // link index -> target
	bytes   int64    // sum of regular file sizes
}

// errTooLarge reports a dataset whose names do not fit the 4 GiB arena.
var errTooLarge = errors.New("dataset metadata exceeds 4 GiB of names")

// arena accumulates the tree's strings.
type arena struct {
	b   strings.Builder
	err error
}

func (a *arena) add(s string) sref {
	off := a.b.Len()
	if off+len(s) > math.MaxUint32 {
		a.err = errTooLarge
		return sref{}
	}
	a.b.WriteString(s)
	return sref{off: uint32(off), n: uint32(len(s))}
}

func (t *tree) str(r sref) string { return t.strs[r.off : r.off+r.n] }

func (t *tree) name(e uint32) string { return t.str(t.ents[e].name) }

// files returns the number of regular files.
func (t *tree) files() int { return len(t.fileEnt) }

// lookup finds name among the children of directory dir.
func (t *tree) lookup(dir uint32, name string) (uint32, bool) {
	d := t.dirs[dir]
	kids := t.ents[d.first : d.first+d.count]
	i, ok := slices.BinarySearchFunc(kids, name, func(e entry, name string) int {
		return strings.Compare(t.str(e.name), name)
	})
	return d.first + uint32(i), ok
}

// lookupPath resolves a slash-separated path relative to the root ("" or
// "." is the root).
func (t *tree) lookupPath(p string) (uint32, bool) {
	if p == "" || p == "." {
		return 0, true
	}
	e := uint32(0)
	for part := range strings.SplitSeq(p, "/") {
		if !t.ents[e].mode.IsDir() {
			return 0, false
		}
		var ok bool
		if e, ok = t.lookup(t.ents[e].ref, part); !ok {
			return 0, false
		}
	}
	return e, true
}

// pathOf returns the slash-separated path of entry e ("" for the root).
func (t *tree) pathOf(e uint32) string {
	if e == 0 {
		return ""
	}
	var parts []string
	for e != 0 {
		parts = append(parts, t.name(e))
		e = t.dirs[t.ents[e].parent].ent
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/")
}

// supported reports whether the tree keeps an entry of mode m: directories,
// regular files and symlinks. Devices, sockets and pipes are left out.
func supported(m iofs.FileMode) bool {
	return m.IsDir() || m.IsRegular() || m&iofs.ModeSymlink != 0
}

// badKid reports an entry the tree leaves out.
func badKid(e *backend.Entry) bool {
	return !supported(e.Mode) || e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/")
}

// cleanKids returns a directory's entries sorted by name, without
// duplicate names (the first listed wins) or entries the tree leaves out.
// A listing that is already clean (List's sorted output) is returned as
// it is; otherwise a copy is fixed, so the listing is never changed.
func cleanKids(kids []backend.Entry) []backend.Entry {
	clean := true
	for i := range kids {
		if badKid(&kids[i]) || (i > 0 && kids[i-1].Name >= kids[i].Name) {
			clean = false
			break
		}
	}
	if clean {
		return kids
	}
	kids = slices.DeleteFunc(slices.Clone(kids), func(e backend.Entry) bool { return badKid(&e) })
	slices.SortStableFunc(kids, func(x, y backend.Entry) int { return cmp.Compare(x.Name, y.Name) })
	return slices.CompactFunc(kids, func(x, y backend.Entry) bool { return x.Name == y.Name })
}

// buildTree lays out the listing (directory path -> its entries) from the
// root down. Regular files get IDs in the byte order of their full paths.
func buildTree(root backend.Entry, listing map[string][]backend.Entry) (*tree, error) {
	// Sized up front: growing arrays of a million entries by doubling
	// copies them over and over (most of a build's time).
	nEnts, nStrs := 1, 0
	for _, es := range listing {
		nEnts += len(es)
		for i := range es {
			nStrs += len(es[i].Name) + len(es[i].Version) + len(es[i].Target)
		}
	}
	t := &tree{ents: make([]entry, 0, nEnts)}
	var a arena
	a.b.Grow(nStrs)
	t.ents = append(t.ents, entry{
		name:  a.add(""),
		mtime: root.ModTime.UnixNano(),
		mode:  iofs.ModeDir | root.Mode.Perm(),
	})
	t.dirs = append(t.dirs, dirRec{ent: 0})
	type fileAt struct {
		dir, ent uint32 // the dir index holding it, its entry
		ver      sref
	}
	files := make([]fileAt, 0, nEnts-len(listing))
	queue := []string{""} // queue[i] is the path of dirs[i]
	for di := 0; di < len(queue); di++ {
		dirPath := queue[di]
		kids := cleanKids(listing[dirPath])
		if len(t.ents)+len(kids) > math.MaxUint32 {
			return nil, fmt.Errorf("dataset has more than %d entries", uint32(math.MaxUint32))
		}
		first := uint32(len(t.ents))
		var nsub uint32
		for _, k := range kids {
			e := entry{
				name:   a.add(k.Name),
				mtime:  k.ModTime.UnixNano(),
				mode:   k.Mode,
				parent: uint32(di),
			}
			idx := uint32(len(t.ents))
			switch {
			case k.Mode.IsDir():
				e.mode = iofs.ModeDir | k.Mode.Perm()
				e.ref = uint32(len(t.dirs))
				t.dirs = append(t.dirs, dirRec{ent: idx})
				queue = append(queue, joinPath(dirPath, k.Name))
				nsub++
			case k.Mode&iofs.ModeSymlink != 0:
				e.mode = iofs.ModeSymlink | 0o777
				e.ref = uint32(len(t.links))
				t.links = append(t.links, a.add(k.Target))
			default:
				e.mode = k.Mode.Perm()
				e.size = k.Size
				t.bytes += k.Size
				files = append(files, fileAt{dir: uint32(di), ent: idx, ver: a.add(k.Version)})
			}
			t.ents = append(t.ents, e)
		}
		t.dirs[di].first, t.dirs[di].count, t.dirs[di].nsub = first, uint32(len(kids)), nsub
	}
	if a.err != nil {
		return nil, a.err
	}
	t.strs = a.b.String()
	// Files are gathered directory by directory, which is already path
	// order unless a directory's subdirectories sort among its files.
	byPath := func(x, y fileAt) int {
		if x.dir == y.dir {
			return strings.Compare(t.name(x.ent), t.name(y.ent))
		}
		return cmpJoined(queue[x.dir], t.name(x.ent), queue[y.dir], t.name(y.ent))
	}
	if !slices.IsSortedFunc(files, byPath) {
		slices.SortFunc(files, byPath)
	}
	t.fileEnt = make([]uint32, len(files))
	t.fileVer = make([]sref, len(files))
	for id, f := range files {
		t.fileEnt[id] = f.ent
		t.ents[f.ent].ref = uint32(id)
		t.fileVer[id] = f.ver
	}
	return t, nil
}

// modTime returns entry e's modification time.
func (t *tree) modTime(e uint32) time.Time { return time.Unix(0, t.ents[e].mtime) }

// joinPath joins a directory path ("" is the root) and a name.
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// cmpJoined compares joinPath(dir1, name1) with joinPath(dir2, name2)
// without building either.
func cmpJoined(dir1, name1, dir2, name2 string) int {
	sep := func(dir string) string {
		if dir == "" {
			return ""
		}
		return "/"
	}
	x := [3]string{dir1, sep(dir1), name1}
	y := [3]string{dir2, sep(dir2), name2}
	i, j := 0, 0
	for {
		for i < 3 && x[i] == "" {
			i++
		}
		for j < 3 && y[j] == "" {
			j++
		}
		switch {
		case i == 3 && j == 3:
			return 0
		case i == 3:
			return -1
		case j == 3:
			return 1
		}
		n := min(len(x[i]), len(y[j]))
		if c := strings.Compare(x[i][:n], y[j][:n]); c != 0 {
			return c
		}
		x[i], y[j] = x[i][n:], y[j][n:]
	}
}
