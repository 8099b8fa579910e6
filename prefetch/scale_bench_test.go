package prefetch

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"path"
	"strings"
	"testing"
	"time"
)

// imagenetFiles is ImageNet-1k's training set size.
const imagenetFiles = 1_281_167

// classFS is a read-only iofs.FS of train/<class>/<file>.JPEG entries in
// ImageNet-1k's shape, answered from arithmetic (fstest.MapFS scans every
// name on each ReadDir, which is quadratic at this size).
type classFS struct{ files, classes int }

func (c classFS) class(i int) string { return fmt.Sprintf("n%08d", 1440764+7*i) }

func (c classFS) perClass(i int) int {
	n := c.files / c.classes
	if i < c.files%c.classes {
		n++
	}
	return n
}

func (c classFS) Open(name string) (iofs.File, error) {
	return nil, &iofs.PathError{Op: "open", Path: name, Err: iofs.ErrNotExist}
}

func (c classFS) ReadDir(name string) ([]iofs.DirEntry, error) {
	switch {
	case name == ".":
		return []iofs.DirEntry{dirEnt{"train", true}}, nil
	case name == "train":
		out := make([]iofs.DirEntry, c.classes)
		for i := range out {
			out[i] = dirEnt{c.class(i), true}
		}
		return out, nil
	case strings.HasPrefix(name, "train/n"):
		var ci int
		if _, err := fmt.Sscanf(path.Base(name), "n%08d", &ci); err != nil || (ci-1440764)%7 != 0 {
			return nil, &iofs.PathError{Op: "readdir", Path: name, Err: iofs.ErrNotExist}
		}
		ci = (ci - 1440764) / 7
		base := path.Base(name)
		out := make([]iofs.DirEntry, c.perClass(ci))
		for i := range out {
			out[i] = dirEnt{fmt.Sprintf("%s_%d.JPEG", base, 7*i+3), false}
		}
		return out, nil
	}
	return nil, &iofs.PathError{Op: "readdir", Path: name, Err: iofs.ErrNotExist}
}

// dirEnt is a DirEntry without an Info.
type dirEnt struct {
	name string
	dir  bool
}

func (d dirEnt) Name() string { return d.name }
func (d dirEnt) IsDir() bool  { return d.dir }
func (d dirEnt) Type() iofs.FileMode {
	if d.dir {
		return iofs.ModeDir
	}
	return 0
}
func (d dirEnt) Info() (iofs.FileInfo, error) { return nil, errors.ErrUnsupported }

var _ iofs.ReadDirFS = classFS{}

// BenchmarkScaleImageFolder builds torchvision's ImageFolder layout of
// 1,281,167 files in 1,000 classes from a file system (what a mount does
// with --order from its TreeFS) and reports the layout's bytes per path.
func BenchmarkScaleImageFolder(b *testing.B) {
	fsys := classFS{files: imagenetFiles, classes: 1000}
	var l *Layout
	for b.Loop() {
		var err error
		if l, err = ImageFolder(fsys, ImageFolderOptions{Root: "train"}); err != nil {
			b.Fatal(err)
		}
	}
	if l.Len() != imagenetFiles {
		b.Fatalf("layout of %d files, want %d", l.Len(), imagenetFiles)
	}
	b.ReportMetric(float64(l.Bytes())/float64(l.Len()), "bytes/path")
}

// BenchmarkScaleObserve times the tracker's handling of one read (index
// lookup and matching against the predicted order) while a reader walks
// an epoch of torch-random order, at 12,811 and 1,281,167 files: the cost
// per read must not grow with the dataset.
func BenchmarkScaleObserve(b *testing.B) {
	for _, n := range []int{imagenetFiles / 100, imagenetFiles} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			paths := make([]string, n)
			for i := range paths {
				paths[i] = fmt.Sprintf("train/c%04d/f%07d.JPEG", i%1000, i)
			}
			l, err := NewLayout(paths)
			if err != nil {
				b.Fatal(err)
			}
			order, err := NewTorchRandom(n, 42, SamplerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			idx, err := order.Epoch(0)
			if err != nil {
				b.Fatal(err)
			}
			p := New(l, order, newFakeStore(time.Millisecond), Options{})
			i := 0
			for b.Loop() {
				p.mu.Lock()
				p.observeLocked(paths[idx[i%n]])
				p.mu.Unlock()
				i++
			}
		})
	}
}
