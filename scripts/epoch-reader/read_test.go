package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPermutation(t *testing.T) {
	a, b := permutation(7, 1, 1000), permutation(7, 1, 1000)
	if !slices.Equal(a, b) {
		t.Error("same seed and epoch gave different orders")
	}
	if slices.Equal(a, permutation(7, 2, 1000)) {
		t.Error("epochs 1 and 2 have the same order")
	}
	sorted := slices.Sorted(slices.Values(a))
	if !slices.Equal(sorted, identity(1000)) {
		t.Error("permutation does not visit every index exactly once")
	}
}

// writeTree writes n files of varied sizes and a manifest for them.
func writeTree(t *testing.T, dir string, n int) string {
	t.Helper()
	var man strings.Builder
	for i := range n {
		rel := fmt.Sprintf("train/c%d/f%03d.JPEG", i%3, i)
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 100*i+1)
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&man, "%s\t%d\t%s\n", rel, len(data), hex.EncodeToString(sum[:]))
	}
	name := filepath.Join(t.TempDir(), "manifest.tsv")
	if err := os.WriteFile(name, []byte(man.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestEpochsVerify(t *testing.T) {
	dir := t.TempDir()
	manifest := writeTree(t, dir, 50)
	copyDir := t.TempDir()
	writeTree(t, copyDir, 50)

	var out bytes.Buffer
	cfg := config{Dir: dir, Epochs: 2, Readers: 4, Seed: 1, Manifest: manifest, Format: "tsv", Label: "x"}
	if err := mainErr(cfg, &out); err != nil {
		t.Fatalf("manifest run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "x\t1\t4\t50\t") {
		t.Errorf("tsv output %q, want 2 rows of 50 files", out.String())
	}
	cfg = config{Dir: dir, Epochs: 1, Readers: 3, Seed: 2, VerifyDir: copyDir, Format: "text", Warm: true}
	out.Reset()
	if err := mainErr(cfg, &out); err != nil || !strings.Contains(out.String(), "total: 50 files") {
		t.Fatalf("verify-dir run: %v\n%s", err, out.String())
	}

	// One changed byte must be caught by both kinds of verification.
	victim := filepath.Join(dir, "train", "c1", "f010.JPEG")
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[500] ^= 1
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mainErr(config{Dir: dir, Epochs: 1, Readers: 4, Manifest: manifest, Format: "text"}, &out); err == nil || !strings.Contains(err.Error(), "f010.JPEG") {
		t.Errorf("manifest run over a corrupted file: %v, want an error naming it", err)
	}
	if err := mainErr(config{Dir: dir, Epochs: 1, Readers: 4, VerifyDir: copyDir, Format: "text"}, &out); err == nil || !strings.Contains(err.Error(), "f010.JPEG") {
		t.Errorf("verify-dir run over a corrupted file: %v, want an error naming it", err)
	}
}

func TestListFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 10)
	files, err := listFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 10 || !slices.IsSortedFunc(files, func(a, b fileInfo) int { return strings.Compare(a.Path, b.Path) }) {
		t.Errorf("listFiles = %d files (sorted %v), want 10 sorted", len(files), files)
	}
}
