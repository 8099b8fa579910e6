package fs

import (
	"errors"
	"io"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"testing"
)

func TestTreeFS(t *testing.T) {
	src := t.TempDir()
	files := makeDataset(t, src)
	writePat(t, filepath.Join(src, "a-b"), 99, 5) // sorts before "a/"... by path bytes
	files["a-b"] = 99
	m, _ := mountDir(t, src, Options{})
	tfs := m.TreeFS()
	var walked []string
	err := iofs.WalkDir(tfs, ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			walked = append(walked, p)
			fi, err := d.Info()
			if err != nil {
				return err
			}
			id, ok := fi.Sys().(uint32)
			if !ok || m.PathOf(id) != p {
				t.Errorf("%s: Sys() = %v, PathOf = %q", p, fi.Sys(), m.PathOf(id))
			}
			if got, ok := m.FileID(p); !ok || got != id {
				t.Errorf("FileID(%s) = %d %v, want %d", p, got, ok, id)
			}
			if fi.Mode().Perm()&0o222 != 0 {
				t.Errorf("%s: writable mode %v", p, fi.Mode())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(walked) != len(files) || m.Files() != len(files) {
		t.Fatalf("walked %d files, Files() %d, want %d", len(walked), m.Files(), len(files))
	}
	// IDs are dense and in path byte order.
	var byID []string
	for id := range uint32(m.Files()) {
		byID = append(byID, m.PathOf(id))
	}
	if !slices.IsSorted(byID) || byID[0] != "a-b" {
		t.Errorf("IDs not in path order: first %q", byID[0])
	}
	if m.PathOf(uint32(m.Files())) != "" {
		t.Error("PathOf out of range is not empty")
	}
	var total int64
	for p := range files {
		fi, err := iofs.Stat(tfs, p)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if total != m.DatasetBytes() {
		t.Errorf("DatasetBytes = %d, sum of sizes %d", m.DatasetBytes(), total)
	}
	if _, err := tfs.Open("nope/x"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("open missing: %v", err)
	}
	if _, err := tfs.Open("/abs"); !errors.Is(err, iofs.ErrInvalid) {
		t.Errorf("open invalid: %v", err)
	}
	// ReadDir(n) pages through a directory.
	f, err := tfs.Open("class03")
	if err != nil {
		t.Fatal(err)
	}
	rd := f.(iofs.ReadDirFile)
	var paged []string
	for {
		des, err := rd.ReadDir(3)
		for _, d := range des {
			paged = append(paged, d.Name())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	all, _ := iofs.ReadDir(tfs, "class03")
	if len(paged) != len(all) || len(all) != 8 {
		t.Errorf("paged %d entries, ReadDir %d, want 8", len(paged), len(all))
	}
	if _, err := f.Read(make([]byte, 1)); err == nil {
		t.Error("Read on TreeFS succeeded")
	}
}
