package main

import (
	"bytes"
	"errors"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stallfs/stallfs/backend/backendtest"
)

func testConfig(t *testing.T) config {
	c, err := parseFlags([]string{"-out", t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSizeDistribution(t *testing.T) {
	for _, tc := range []struct{ mean, min, max int64 }{
		{110 << 10, 10 << 10, 1 << 20}, // the defaults
		{50 << 10, 1 << 10, 4 << 20},
		{900 << 10, 10 << 10, 1 << 20}, // most of the mass clamped at max
	} {
		c := testConfig(t)
		c.files, c.mean, c.min, c.max = 2000, tc.mean, tc.min, tc.max
		specs := plan(c)
		if len(specs) != 2000 {
			t.Fatalf("plan made %d files, want 2000", len(specs))
		}
		var sum int64
		distinct := map[int64]bool{}
		for _, s := range specs {
			if s.size < c.min || s.size > c.max {
				t.Fatalf("%s: size %d outside [%d, %d]", s.path, s.size, c.min, c.max)
			}
			sum += s.size
			distinct[s.size] = true
		}
		mean := float64(sum) / 2000
		if mean < 0.9*float64(c.mean) || mean > 1.1*float64(c.mean) {
			t.Errorf("mean %d, min %d, max %d: sample mean %.0f, want within 10%%", c.mean, c.min, c.max, mean)
		}
		if len(distinct) < 100 {
			t.Errorf("only %d distinct sizes among 2000 files", len(distinct))
		}
	}

	c := testConfig(t)
	c.bytes = 100 << 20
	var sum int64
	for _, s := range plan(c) {
		sum += s.size
	}
	if sum < 90<<20 || sum > 110<<20 {
		t.Errorf("-bytes 100MiB planned %d bytes", sum)
	}
}

func TestPlanNames(t *testing.T) {
	c := testConfig(t)
	c.files, c.classes, c.shards, c.shardSize = 1000, 7, 2, 1<<20
	specs := plan(c)
	name := regexp.MustCompile(`^train/n(\d{8})/n(\d{8})_\d+\.JPEG$`)
	seen := map[string]bool{}
	classes := map[string]int{}
	lastClass := ""
	for _, s := range specs[:1000] {
		m := name.FindStringSubmatch(s.path)
		if m == nil || m[1] != m[2] {
			t.Fatalf("file name %q is not ImageNet-like", s.path)
		}
		if seen[s.path] {
			t.Fatalf("duplicate path %q", s.path)
		}
		seen[s.path] = true
		if m[1] < lastClass {
			t.Fatalf("class %s after %s: class directories not in path order", m[1], lastClass)
		}
		lastClass = m[1]
		classes[m[1]]++
	}
	if len(classes) != 7 {
		t.Errorf("%d classes, want 7", len(classes))
	}
	for cl, n := range classes {
		if n != 142 && n != 143 {
			t.Errorf("class %s has %d files, want 142 or 143", cl, n)
		}
	}
	if specs[1000].path != "shards/shard-000000.tar" || specs[1001].size != 1<<20 {
		t.Errorf("shards = %+v", specs[1000:])
	}
	c.classes = 100000 // class ids must stay eight digits
	if s := plan(c); !name.MatchString(s[999].path) {
		t.Errorf("with 100000 classes: %q", s[999].path)
	}
}

// generateTree generates c into a fresh directory and returns it with its
// manifest.
func generateTree(t *testing.T, c config) (dir, manifest string) {
	c.out = t.TempDir()
	c.manifest = filepath.Join(t.TempDir(), "manifest.tsv")
	if _, err := generate(c); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(c.manifest)
	if err != nil {
		t.Fatal(err)
	}
	return c.out, string(m)
}

func TestDeterministic(t *testing.T) {
	c := testConfig(t)
	c.files, c.classes, c.shards, c.shardSize = 60, 4, 2, 3<<20+5
	dir1, m1 := generateTree(t, c)
	c.workers = 1
	dir2, m2 := generateTree(t, c)
	if m1 != m2 {
		t.Fatalf("two runs of the same flags wrote different manifests")
	}
	lines := strings.Split(strings.TrimSuffix(m1, "\n"), "\n")
	if len(lines) != 62 {
		t.Fatalf("manifest has %d lines, want 62", len(lines))
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 3 || len(f[2]) != 64 {
			t.Fatalf("manifest line %q", l)
		}
		if i > 0 && strings.Split(lines[i-1], "\t")[0] >= f[0] {
			t.Fatalf("manifest not sorted at %q", f[0])
		}
		a, err := os.ReadFile(filepath.Join(dir1, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir2, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs between runs", f[0])
		}
		if !bytes.Equal(a, backendtest.PatternBytes(f[0], len(a))) {
			t.Fatalf("%s is not the pattern of its path", f[0])
		}
	}
	c.seed = 2
	if _, m3 := generateTree(t, c); m3 == m1 {
		t.Errorf("-seed 2 wrote the same dataset as -seed 1")
	}
}

func TestJPEG(t *testing.T) {
	c := testConfig(t)
	c.files, c.classes, c.jpeg = 12, 2, true
	dir, m1 := generateTree(t, c)
	if _, m2 := generateTree(t, c); m1 != m2 {
		t.Fatalf("two -jpeg runs wrote different manifests")
	}
	for _, s := range plan(c) {
		data, err := os.ReadFile(filepath.Join(dir, s.path))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != s.size {
			t.Errorf("%s: %d bytes, want %d", s.path, len(data), s.size)
		}
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s does not decode: %v", s.path, err)
		}
		// The picture, not padding, is most of the file.
		if b := img.Bounds(); b.Dx()*b.Dy() < int(s.size)/8 {
			t.Errorf("%s: %v image for %d bytes", s.path, b, s.size)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"4096", 4096}, {"110KiB", 110 << 10}, {"1GiB", 1 << 30}, {"1G", 1 << 30},
		{"10KB", 10000}, {"1.5MB", 1500000}, {"256MiB", 256 << 20}, {"7B", 7}, {"0", 0},
	} {
		if got, err := parseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "KiB", "-1", "1XB", "abc", "99999999999TiB"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-out", "x", "-mean", "5KiB"},
		{"-out", "x", "-min", "2MiB"},
		{"-out", "x", "-bytes", "lots"},
		{"-out", "x", "-classes", "0"},
		{"-out", "x", "-jpeg", "-min", "100"},
		{"-out", "x", "extra"},
		{"-nope"},
	} {
		var ue usageError
		if err := run(args, io.Discard, io.Discard); !errors.As(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}
