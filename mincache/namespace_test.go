package mincache

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNamespaceDirIsOpensDirectory(t *testing.T) {
	root := t.TempDir()
	c, err := Open(Options{DiskBytes: 1 << 20, Dir: root, Source: "file:///data/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := NamespaceDir(root, "file:///data/a")
	if _, err := os.Stat(filepath.Join(ns, "lock")); err != nil {
		t.Errorf("NamespaceDir = %s, not the namespace Open made: %v", ns, err)
	}
	if filepath.Dir(ns) != root {
		t.Errorf("NamespaceDir = %s, not directly under %s", ns, root)
	}
	if other := NamespaceDir(root, "file:///data/b"); other == ns {
		t.Errorf("two sources share namespace %s", ns)
	}
}
