package fs

import (
	"fmt"
	iofs "io/fs"
	"strings"
)

// checkTree verifies everything the mount relies on in a tree that did not
// come from buildTree (a loaded metadata file), and derives fileEnt. After
// it succeeds no index is out of range, every entry but the root is the
// child of exactly one directory, directories form a tree rooted at 0 (a
// directory's parent has a smaller index, as buildTree's breadth-first
// order gives), children are sorted by name without duplicates, and file
// IDs and the total size are consistent. It is O(entries).
func checkTree(t *tree) error {
	nStrs := uint64(len(t.strs))
	inArena := func(r sref) bool { return uint64(r.off)+uint64(r.n) <= nStrs }
	if len(t.ents) == 0 || len(t.dirs) == 0 {
		return fmt.Errorf("no root")
	}
	if root := t.ents[0]; !root.mode.IsDir() || root.ref != 0 || t.dirs[0].ent != 0 {
		return fmt.Errorf("entry 0 is not the root directory")
	}
	nFiles := len(t.fileVer)
	t.fileEnt = make([]uint32, nFiles)
	seen := make([]bool, nFiles)
	var bytes int64
	nDirEnts := 0
	for i := range t.ents {
		e := &t.ents[i]
		if !inArena(e.name) || int(e.parent) >= len(t.dirs) {
			return fmt.Errorf("entry %d: name or parent out of range", i)
		}
		switch {
		case e.mode.IsDir():
			if e.mode != iofs.ModeDir|e.mode.Perm() || int(e.ref) >= len(t.dirs) || t.dirs[e.ref].ent != uint32(i) {
				return fmt.Errorf("entry %d: bad directory", i)
			}
			if i != 0 && e.parent >= e.ref {
				return fmt.Errorf("entry %d: directory %d under directory %d", i, e.ref, e.parent)
			}
			nDirEnts++
		case e.mode.Type() == iofs.ModeSymlink:
			if int(e.ref) >= len(t.links) {
				return fmt.Errorf("entry %d: link out of range", i)
			}
		case e.mode.IsRegular():
			if int(e.ref) >= nFiles || seen[e.ref] || e.size < 0 {
				return fmt.Errorf("entry %d: bad file ID %d or size %d", i, e.ref, e.size)
			}
			seen[e.ref] = true
			t.fileEnt[e.ref] = uint32(i)
			bytes += e.size
		default:
			return fmt.Errorf("entry %d: mode %v", i, e.mode)
		}
	}
	if nDirEnts != len(t.dirs) {
		return fmt.Errorf("%d directory entries for %d directories", nDirEnts, len(t.dirs))
	}
	for id, ok := range seen {
		if !ok {
			return fmt.Errorf("file ID %d has no entry", id)
		}
		if !inArena(t.fileVer[id]) {
			return fmt.Errorf("file ID %d: version out of range", id)
		}
	}
	for l, r := range t.links {
		if !inArena(r) {
			return fmt.Errorf("link %d: target out of range", l)
		}
	}
	if bytes != t.bytes {
		return fmt.Errorf("files add up to %d bytes, header says %d", bytes, t.bytes)
	}
	var children uint64
	for di, d := range t.dirs {
		end := uint64(d.first) + uint64(d.count)
		if end > uint64(len(t.ents)) || (d.count > 0 && d.first == 0) {
			return fmt.Errorf("directory %d: children out of range", di)
		}
		var nsub uint32
		for c := d.first; c < d.first+d.count; c++ {
			// A child names its directory: ranges cannot overlap.
			if t.ents[c].parent != uint32(di) {
				return fmt.Errorf("directory %d: entry %d belongs to %d", di, c, t.ents[c].parent)
			}
			if c > d.first && strings.Compare(t.name(c-1), t.name(c)) >= 0 {
				return fmt.Errorf("directory %d: children not sorted at entry %d", di, c)
			}
			if name := t.name(c); name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
				return fmt.Errorf("directory %d: bad name %q", di, name)
			}
			if t.ents[c].mode.IsDir() {
				nsub++
			}
		}
		if nsub != d.nsub {
			return fmt.Errorf("directory %d: %d subdirectories, recorded %d", di, nsub, d.nsub)
		}
		children += uint64(d.count)
	}
	if children != uint64(len(t.ents)-1) {
		return fmt.Errorf("%d entries are children of directories, want %d", children, len(t.ents)-1)
	}
	return nil
}
