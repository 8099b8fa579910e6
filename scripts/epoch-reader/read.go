package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fileInfo is one file of the dataset.
type fileInfo struct {
	Path   string // slash-separated, relative to the dataset root
	Size   int64
	SHA256 string // hex; empty when not from a manifest
}

// listFiles walks dir and returns its regular files sorted by path.
func listFiles(dir string) ([]fileInfo, error) {
	var files []fileInfo
	err := filepath.WalkDir(dir, func(path string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, fileInfo{Path: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// readManifest reads "path<TAB>size<TAB>sha256" lines.
func readManifest(name string) ([]fileInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var files []fileInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if sc.Text() == "" {
			continue
		}
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want path<TAB>size<TAB>sha256", name, line)
		}
		size, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || size < 0 || len(parts[2]) != 64 {
			return nil, fmt.Errorf("%s:%d: bad size or sha256", name, line)
		}
		files = append(files, fileInfo{Path: parts[0], Size: size, SHA256: strings.ToLower(parts[2])})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return files, nil
}

// permutation is epoch's order of n files: a seeded shuffle, the same for
// the same (seed, epoch) on every run.
func permutation(seed, epoch uint64, n int) []int {
	return rand.New(rand.NewPCG(seed, epoch)).Perm(n)
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// reader reads files with a fixed number of concurrent readers.
type reader struct {
	dir       string
	files     []fileInfo
	readers   int
	verifyDir string
}

// epoch reads every file in order (readers take the next index in turn, as
// DataLoader workers do) and returns the totals, or the first error.
func (r *reader) epoch(order []int) (result, error) {
	var (
		next     atomic.Int64
		nbytes   atomic.Int64
		nfiles   atomic.Int64
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range r.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf, ref []byte
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(len(order)) {
					return
				}
				f := r.files[order[i]]
				var n int
				var err error
				n, buf, ref, err = r.readOne(f, buf, ref)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
				nbytes.Add(int64(n))
				nfiles.Add(1)
			}
		}()
	}
	wg.Wait()
	res := result{Files: int(nfiles.Load()), Bytes: nbytes.Load(), Elapsed: time.Since(start)}
	return res, firstErr
}

// readOne reads f whole into buf (grown as needed) and verifies it.
func (r *reader) readOne(f fileInfo, buf, ref []byte) (int, []byte, []byte, error) {
	data, err := readFile(filepath.Join(r.dir, filepath.FromSlash(f.Path)), buf)
	if err != nil {
		return 0, buf, ref, err
	}
	buf = data[:cap(data)]
	if f.SHA256 != "" {
		if int64(len(data)) != f.Size {
			return 0, buf, ref, fmt.Errorf("%s: read %d bytes, manifest says %d", f.Path, len(data), f.Size)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			return 0, buf, ref, fmt.Errorf("%s: sha256 differs from the manifest", f.Path)
		}
	}
	if r.verifyDir != "" {
		want, err := readFile(filepath.Join(r.verifyDir, filepath.FromSlash(f.Path)), ref)
		if err != nil {
			return 0, buf, ref, err
		}
		ref = want[:cap(want)]
		if !bytes.Equal(data, want) {
			return 0, buf, ref, fmt.Errorf("%s: %d bytes read differ from the %d bytes of %s", f.Path, len(data), len(want), r.verifyDir)
		}
	}
	return len(data), buf, ref, nil
}

// readFile reads the whole file into buf's storage when it fits.
func readFile(path string, buf []byte) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if need := int(st.Size()) + 1; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := fh.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
}
