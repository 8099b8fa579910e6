package mincache

// Lock order: dropMu before mu.

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

// diskEntry is the index's view of one entry file.
type diskEntry struct {
	ver    uint64
	size   int64
	hdrLen uint32
}

func (e diskEntry) fileLen() int64 { return int64(e.hdrLen) + e.size }

// diskTier is the persistent local-disk tier: one file per item under
// data/<hh>/, named by key and version hash, written to tmp/ and renamed.
type diskTier struct {
	// immutable after openDiskTier
	budget int64
	dir    string // namespace directory
	logger *slog.Logger
	lock   *os.File

	// dropMu is held shared by an admission from its reservation until its
	// index record is written, and exclusively by drop and close, so a
	// drop never races a half-written entry.
	dropMu sync.RWMutex

	mu sync.RWMutex
	// guarded by mu
	m       map[keyHash]diskEntry
	pending map[keyHash]uint64
	used    int64
	index   *os.File // nil once closed or after an index write failed
	closed  bool

	disabled   atomic.Pointer[string]
	vanishLogd atomic.Bool
	ctr        counters
}

func openDiskTier(budget int64, root, source string, logger *slog.Logger) (*diskTier, error) {
	dir := filepath.Join(root, namespace(source))
	t := &diskTier{budget: budget, dir: dir, logger: logger, pending: map[keyHash]uint64{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mincache: create cache dir: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, "lock"))
	if err != nil {
		return nil, err
	}
	t.lock = lock
	if err := t.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return t, nil
}

// load prepares the directories and loads or rebuilds the index.
func (t *diskTier) load() error {
	if err := os.RemoveAll(t.tmpDir()); err != nil {
		return fmt.Errorf("mincache: clean tmp: %w", err)
	}
	if err := t.makeDirs(); err != nil {
		return err
	}
	ipath := filepath.Join(t.dir, indexName)
	m, valid, err := loadIndex(ipath)
	if err == nil {
		t.index, err = openIndexAppend(ipath, valid)
		if err != nil {
			return err
		}
	} else {
		if !errors.Is(err, fs.ErrNotExist) {
			t.logger.Warn("mincache: rebuilding disk index from entry headers", "dir", t.dir, "err", err)
		}
		if m, err = t.rebuild(); err != nil {
			return err
		}
		if t.index, err = writeIndex(t.dir, m, false); err != nil {
			return err
		}
	}
	t.m = m
	for _, e := range m {
		t.used += e.fileLen()
	}
	return nil
}

func (t *diskTier) makeDirs() error {
	// data/<hh>/ subdirectories are made on first use (writeEntry).
	for _, d := range []string{t.tmpDir(), filepath.Join(t.dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mincache: create cache dir: %w", err)
		}
	}
	return nil
}

// rebuild scans every entry file's header (never its data) and removes the
// ones that do not verify.
func (t *diskTier) rebuild() (map[keyHash]diskEntry, error) {
	m := map[keyHash]diskEntry{}
	data := filepath.Join(t.dir, "data")
	subs, err := os.ReadDir(data)
	if err != nil {
		return nil, fmt.Errorf("mincache: rebuild index: %w", err)
	}
	for _, sub := range subs {
		names, err := os.ReadDir(filepath.Join(data, sub.Name()))
		if err != nil {
			return nil, fmt.Errorf("mincache: rebuild index: %w", err)
		}
		for _, de := range names {
			p := filepath.Join(data, sub.Name(), de.Name())
			h, e, err := t.scanEntry(p)
			if err != nil || p != t.entryPath(h, e.ver) {
				t.logger.Warn("mincache: removing unreadable cache entry", "path", p, "err", err)
				_ = os.Remove(p)
				continue
			}
			if old, ok := m[h]; ok { // two versions on disk: keep one
				_ = os.Remove(t.entryPath(h, old.ver))
			}
			m[h] = e
		}
	}
	return m, nil
}

func (t *diskTier) scanEntry(p string) (keyHash, diskEntry, error) {
	f, err := os.Open(p)
	if err != nil {
		return keyHash{}, diskEntry{}, err
	}
	defer f.Close()
	var read int64
	hdr, err := readHeader(f, 0, &read)
	t.ctr.readBytes.Add(read)
	if err != nil {
		return keyHash{}, diskEntry{}, err
	}
	st, err := f.Stat()
	if err != nil {
		return keyHash{}, diskEntry{}, err
	}
	if st.Size() != hdr.hdrLen+hdr.size {
		return keyHash{}, diskEntry{}, fmt.Errorf("length %d, want %d: %w", st.Size(), hdr.hdrLen+hdr.size, errCorrupt)
	}
	return hdr.h, diskEntry{ver: hdr.ver, size: hdr.size, hdrLen: uint32(hdr.hdrLen)}, nil
}

func (t *diskTier) tmpDir() string { return filepath.Join(t.dir, "tmp") }

func (t *diskTier) entryPath(h keyHash, v uint64) string {
	name := h.String() + "-" + strconv.FormatUint(v, 16)
	return filepath.Join(t.dir, "data", name[:2], name)
}

// disable stops admission for good (until a successful drop) and logs once.
func (t *diskTier) disable(err error) {
	t.ctr.errors.Add(1)
	reason := err.Error()
	if t.disabled.CompareAndSwap(nil, &reason) {
		t.logger.Error("mincache: disk tier admission disabled", "dir", t.dir, "err", err)
	}
}

// lookup finds h; stale reports an entry of another version.
func (t *diskTier) lookup(h keyHash, v uint64) (e diskEntry, hit, stale bool) {
	t.mu.RLock()
	e, ok := t.m[h]
	t.mu.RUnlock()
	return e, ok && e.ver == v, ok && e.ver != v
}

// remove deletes the entry of h if it still is e; invalidated or corrupt.
func (t *diskTier) remove(h keyHash, e diskEntry) bool {
	t.mu.Lock()
	ok := t.removeLocked(h, e)
	t.mu.Unlock()
	if ok {
		_ = os.Remove(t.entryPath(h, e.ver))
	}
	return ok
}

func (t *diskTier) removeLocked(h keyHash, e diskEntry) bool {
	if cur, ok := t.m[h]; !ok || cur != e {
		return false
	}
	delete(t.m, h)
	t.used -= e.fileLen()
	t.appendLocked(recDel, h, e)
	return true
}

// invalidate removes the entry of h unless it has version v.
func (t *diskTier) invalidate(h keyHash, v uint64) {
	if e, _, stale := t.lookup(h, v); stale && t.remove(h, e) {
		t.ctr.invalidated.Add(1)
	}
}

// appendLocked writes one index record; a failure disables admission
// (the entry files stay valid, the next Open rebuilds the index).
func (t *diskTier) appendLocked(typ byte, h keyHash, e diskEntry) {
	if t.index == nil {
		return
	}
	r := encodeRecord(typ, h, e)
	if _, err := t.index.Write(r[:]); err != nil {
		t.disable(fmt.Errorf("append to index: %w", err))
		t.index.Close()
		t.index = nil
		_ = os.Remove(filepath.Join(t.dir, indexName)) // force a rebuild
	}
}

// read copies item bytes of e from its file into p, verified.
func (t *diskTier) read(k Key, h keyHash, e diskEntry, p []byte, off int64) (int, error) {
	f, err := os.Open(t.entryPath(h, e.ver))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var read int64
	defer func() { t.ctr.readBytes.Add(read) }()
	hdr, err := readHeader(f, int64(e.hdrLen), &read)
	if err != nil {
		return 0, err
	}
	if hdr.h != h || hdr.ver != e.ver || hdr.size != e.size || hdr.path != k.Path ||
		hdr.version != k.Version || hdr.chunk != k.Chunk {
		return 0, fmt.Errorf("header names another item: %w", errCorrupt)
	}
	return readRange(f, &hdr, p, off, &read)
}

// fail handles a read error of entry e: a corrupt or vanished entry is
// dropped (a miss, refetched by the caller); anything else is counted.
func (t *diskTier) fail(h keyHash, e diskEntry, err error) {
	t.ctr.errors.Add(1)
	switch {
	case errors.Is(err, errCorrupt):
		if t.remove(h, e) {
			t.ctr.corrupt.Add(1)
			t.logger.Warn("mincache: dropped corrupt disk entry", "entry", t.entryPath(h, e.ver), "err", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if t.remove(h, e) {
			t.ctr.corrupt.Add(1)
			if t.vanishLogd.CompareAndSwap(false, true) {
				t.logger.Warn("mincache: disk entries vanished under the cache", "dir", t.dir, "err", err)
			}
		}
	}
}

// admit stores data under h if the budget allows, and reports whether the
// key is now stored (or being stored) at version v.
func (t *diskTier) admit(k Key, h keyHash, v uint64, data []byte) bool {
	if t.disabled.Load() != nil {
		return false
	}
	hdr := encodeHeader(k, h, v, data)
	e := diskEntry{ver: v, size: int64(len(data)), hdrLen: uint32(len(hdr))}

	t.dropMu.RLock()
	defer t.dropMu.RUnlock()
	t.mu.Lock()
	if t.closed || t.index == nil {
		t.mu.Unlock()
		return false
	}
	if old, ok := t.m[h]; ok {
		if old.ver == v {
			t.mu.Unlock()
			return true
		}
		t.removeLocked(h, old)
		_ = os.Remove(t.entryPath(h, old.ver))
		t.ctr.invalidated.Add(1)
	}
	if pv, ok := t.pending[h]; ok {
		t.mu.Unlock()
		return pv == v
	}
	if t.used+e.fileLen() > t.budget {
		t.mu.Unlock()
		t.ctr.rejectedFull.Add(1)
		return false
	}
	t.used += e.fileLen()
	t.pending[h] = v
	t.mu.Unlock()

	final := t.entryPath(h, v)
	err := t.writeEntry(final, hdr, data)

	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, h)
	if err != nil {
		t.used -= e.fileLen()
		t.disable(err)
		return false
	}
	if t.index == nil { // index append failed meanwhile
		t.used -= e.fileLen()
		_ = os.Remove(final)
		return false
	}
	t.m[h] = e
	t.appendLocked(recAdd, h, e)
	t.ctr.admitted.Add(1)
	return true
}

func (t *diskTier) writeEntry(final string, hdr, data []byte) error {
	f, err := os.CreateTemp(t.tmpDir(), filepath.Base(final)+".*")
	if err != nil {
		return fmt.Errorf("create entry: %w", err)
	}
	_, err = f.Write(hdr)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
		if errors.Is(err, fs.ErrNotExist) {
			// data/<hh>/ not made yet; a missing data/ (the cache dir
			// removed under us) stays an error.
			if err = os.Mkdir(filepath.Dir(final), 0o755); err == nil {
				err = os.Rename(f.Name(), final)
			}
		}
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write entry: %w", err)
	}
	return nil
}

// drop deletes every entry and empties the index. A successful drop
// re-enables admission after a failure.
func (t *diskTier) drop() error {
	t.dropMu.Lock()
	defer t.dropMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	clear(t.m)
	t.used = 0
	// Readers that already looked an entry up find its file gone (a miss)
	// or still read it whole through their open descriptor (valid bytes).
	data := filepath.Join(t.dir, "data")
	trash := filepath.Join(t.dir, "data.drop")
	_ = os.RemoveAll(trash)
	if err := os.Rename(data, trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mincache: drop disk tier: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("mincache: drop disk tier: %w", err)
	}
	if err := t.makeDirs(); err != nil {
		return err
	}
	if t.index != nil {
		t.index.Close()
	}
	idx, err := writeIndex(t.dir, t.m, false)
	if err != nil {
		t.index = nil
		return err
	}
	t.index = idx
	t.disabled.Store(nil)
	return nil
}

// close writes the compacted index and releases the lock.
func (t *diskTier) close() error {
	t.dropMu.Lock()
	defer t.dropMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if t.index != nil {
		t.index.Close()
		var idx *os.File
		if idx, err = writeIndex(t.dir, t.m, true); err == nil {
			idx.Close()
		}
		t.index = nil
	}
	t.m = map[keyHash]diskEntry{}
	t.lock.Close()
	return err
}

func (t *diskTier) info() TierInfo {
	t.mu.RLock()
	ti := TierInfo{BudgetBytes: t.budget, UsedBytes: t.used, Items: int64(len(t.m))}
	t.mu.RUnlock()
	if r := t.disabled.Load(); r != nil {
		ti.Disabled, ti.DisabledReason = true, *r
	}
	t.ctr.fill(&ti)
	return ti
}
