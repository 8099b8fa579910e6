package main

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/mincache"
)

// ageTree sets the times of every directory below root (root included) to
// a fixed instant long before any listing, so that the listing can vouch
// for them.
func ageTree(t *testing.T, root string) {
	t.Helper()
	old := time.Unix(1_600_000_000, 0)
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mountOnce mounts src at mnt with flags, runs check on the mount, then
// unmounts with SIGTERM and returns the mount's log.
func mountOnce(t *testing.T, src, mnt string, check func(), flags ...string) string {
	t.Helper()
	p := startForeground(t, src, mnt, flags...)
	check()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.waitExit(t, 30*time.Second); err != nil {
		t.Fatalf("unmount: %v\n%s", err, p.stderr.String())
	}
	return p.stderr.String()
}

// TestE2EMetadataPersisted mounts a local source with a cache directory,
// unmounts it and mounts it again: the second mount serves the persisted
// tree without listing the source (its log says so and shows no listing),
// a changed source is listed again, and a file rewritten in place (no
// directory changes) reads as an error, never as wrong bytes.
func TestE2EMetadataPersisted(t *testing.T) {
	src, mnt, files := newMountDirs(t)
	ageTree(t, src)
	cacheDir := t.TempDir()
	flags := []string{"--cache-dir", cacheDir, "--cache-mem", "16MiB", "--cache-disk", "0"}
	treeFile := filepath.Join(mincache.NamespaceDir(cacheDir, "file://"+src), metadataFileName)
	sameListing := func() {
		t.Helper()
		if got, want := fileTree(t, mnt, true), fileTree(t, src, true); !slices.Equal(got, want) {
			t.Errorf("mount lists %v\nsource has  %v", got, want)
		}
	}

	log1 := mountOnce(t, src, mnt, func() { sameListing(); checkFiles(t, mnt, files) }, flags...)
	if !strings.Contains(log1, "tree listed and persisted") {
		t.Fatalf("first mount did not persist its tree:\n%s", log1)
	}
	if _, err := os.Stat(treeFile); err != nil {
		t.Fatalf("no metadata file in the source's cache namespace: %v", err)
	}

	log2 := mountOnce(t, src, mnt, func() { sameListing(); checkFiles(t, mnt, files) }, flags...)
	if !strings.Contains(log2, "tree loaded from persisted metadata (directory times unchanged)") ||
		strings.Contains(log2, "tree listed") {
		t.Fatalf("remount of an unchanged source listed it:\n%s", log2)
	}

	// A new file changes its directory's time: the next mount lists.
	writeTestFile(t, src, "train/n01/new.JPEG", pattern("train/n01/new.JPEG", 777))
	log3 := mountOnce(t, src, mnt, func() {
		sameListing()
		checkFiles(t, mnt, append(slices.Clone(files), "train/n01/new.JPEG"))
	}, flags...)
	if !strings.Contains(log3, "persisted metadata out of date") || !strings.Contains(log3, `train/n01`) ||
		!strings.Contains(log3, "tree listed and persisted") {
		t.Fatalf("changed source not listed again:\n%s", log3)
	}

	// A file rewritten in place changes no directory: the persisted tree
	// is used, and the stale file fails to read (EIO) instead of serving
	// bytes of another version.
	ageTree(t, src)
	mountOnce(t, src, mnt, func() {}, flags...) // lists: the directory times moved
	if err := os.WriteFile(filepath.Join(src, "one"), []byte("XY"), 0o644); err != nil {
		t.Fatal(err)
	}
	ageTree(t, src)
	log5 := mountOnce(t, src, mnt, func() {
		_, err := os.ReadFile(filepath.Join(mnt, "one"))
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("read of a file rewritten in place: %v, want EIO", err)
		}
		checkFiles(t, mnt, slices.DeleteFunc(slices.Clone(files), func(p string) bool { return p == "one" }))
	}, flags...)
	if !strings.Contains(log5, "directory times unchanged") {
		t.Errorf("in-place rewrite: persisted tree not used:\n%s", log5)
	}

	// --metadata-cache=false lists at every mount and leaves the file alone.
	before, err := os.Stat(treeFile)
	if err != nil {
		t.Fatal(err)
	}
	log6 := mountOnce(t, src, mnt, func() {}, append(slices.Clone(flags), "--metadata-cache=false")...)
	if strings.Contains(log6, "persisted metadata") {
		t.Errorf("--metadata-cache=false used the metadata file:\n%s", log6)
	}
	if after, err := os.Stat(treeFile); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("--metadata-cache=false touched the metadata file: %v", err)
	}
}
