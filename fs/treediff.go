package fs

// treeDiff counts the differences between two listings of a source.
type treeDiff struct {
	added, removed, changed int
}

func (d treeDiff) none() bool { return d == treeDiff{} }

// diffTrees compares old and new by path: a name only in new is added,
// only in old removed; a name of another type, a file of another size or
// version, or a link with another target is changed. Directory times are
// not compared (object stores make them up). Files are merged in ID order,
// which is path order in both trees.
func diffTrees(old, new *tree) treeDiff {
	var d treeDiff
	i, j := 0, 0
	for i < old.files() && j < new.files() {
		po, pn := old.pathOf(old.fileEnt[i]), new.pathOf(new.fileEnt[j])
		switch {
		case po < pn:
			d.removed++
			i++
		case po > pn:
			d.added++
			j++
		default:
			eo, en := &old.ents[old.fileEnt[i]], &new.ents[new.fileEnt[j]]
			if eo.size != en.size || old.str(old.fileVer[i]) != new.str(new.fileVer[j]) {
				d.changed++
			}
			i++
			j++
		}
	}
	d.removed += old.files() - i
	d.added += new.files() - j
	// Directories and links are few next to files: compare them by map.
	others := func(t *tree) map[string]string {
		m := map[string]string{}
		for e := range t.ents {
			ent := &t.ents[e]
			switch {
			case ent.mode.IsDir():
				m[t.pathOf(uint32(e))] = "/"
			case !ent.mode.IsRegular():
				m[t.pathOf(uint32(e))] = "@" + t.str(t.links[ent.ref])
			}
		}
		return m
	}
	mo, mn := others(old), others(new)
	for p, vo := range mo {
		vn, ok := mn[p]
		switch {
		case !ok:
			d.removed++
		case vn != vo:
			d.changed++
		}
	}
	for p := range mn {
		if _, ok := mo[p]; !ok {
			d.added++
		}
	}
	return d
}
