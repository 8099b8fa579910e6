package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stallfs/stallfs/backend/backendtest/pattern"
)

// chunk is how much of a file a worker generates and writes at once.
const chunk = 1 << 20

// stats is what generate wrote.
type stats struct {
	files, shards int
	bytes         int64
}

// generate writes the planned files under c.out with c.workers writers, and
// the manifest if asked.
func generate(c config) (stats, error) {
	specs := plan(c)
	var jm *jpegMaker
	if c.jpeg {
		m, err := newJPEGMaker()
		if err != nil {
			return stats{}, err
		}
		jm = m
	}
	dirs := map[string]bool{}
	for _, s := range specs {
		d := filepath.Dir(filepath.Join(c.out, filepath.FromSlash(s.path)))
		if !dirs[d] {
			dirs[d] = true
			if err := os.MkdirAll(d, 0o755); err != nil {
				return stats{}, err
			}
		}
	}

	sums := make([]string, len(specs)) // each index written by one worker
	next := atomic.Int64{}
	var (
		errMu    sync.Mutex
		firstErr error
	)
	failed := atomic.Bool{}
	var wg sync.WaitGroup
	for range min(c.workers, max(1, len(specs))) {
		wg.Go(func() {
			w := writer{jm: jm, buf: make([]byte, chunk)}
			if c.manifest != "" {
				w.h = sha256.New()
			}
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(specs) {
					return
				}
				sum, err := w.write(c.out, specs[i])
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					failed.Store(true)
					return
				}
				sums[i] = sum
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return stats{}, firstErr
	}

	var st stats
	for _, s := range specs {
		if strings.HasPrefix(s.path, "shards/") {
			st.shards++
		} else {
			st.files++
		}
		st.bytes += s.size
	}
	if c.manifest != "" {
		if err := writeManifest(c.manifest, specs, sums); err != nil {
			return stats{}, err
		}
	}
	return st, nil
}

// writer writes files, reusing its buffers.
type writer struct {
	jm   *jpegMaker
	buf  []byte
	jbuf bytes.Buffer
	h    hash.Hash // nil without a manifest
}

// write writes one file and returns its hex SHA-256 (empty without a
// manifest).
func (w *writer) write(out string, s fileSpec) (sum string, err error) {
	f, err := os.Create(filepath.Join(out, filepath.FromSlash(s.path)))
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if w.h != nil {
		w.h.Reset()
	}
	if s.jpeg {
		if err := w.jm.make(s, &w.jbuf); err != nil {
			return "", err
		}
		if _, err := f.Write(w.jbuf.Bytes()); err != nil {
			return "", err
		}
		if w.h != nil {
			w.h.Write(w.jbuf.Bytes())
		}
	} else {
		for off := int64(0); off < s.size; off += chunk {
			p := w.buf[:min(chunk, s.size-off)]
			pattern.Fill(s.path, off, p)
			if _, err := f.Write(p); err != nil {
				return "", err
			}
			if w.h != nil {
				w.h.Write(p)
			}
		}
	}
	if w.h == nil {
		return "", nil
	}
	return hex.EncodeToString(w.h.Sum(nil)), nil
}

// writeManifest writes "path<TAB>size<TAB>sha256" lines sorted by path
// (byte order), through a temporary name.
func writeManifest(name string, specs []fileSpec, sums []string) error {
	order := make([]int, len(specs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(specs[a].path, specs[b].path) })
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	for _, i := range order {
		fmt.Fprintf(bw, "%s\t%d\t%s\n", specs[i].path, specs[i].size, sums[i])
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return os.Rename(tmp, name)
}
