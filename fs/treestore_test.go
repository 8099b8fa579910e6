package fs

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/throttle"
)

// logCapture is a slog.Handler that keeps every record's message and
// attributes, safe to use from goroutines that outlive a test.
type logCapture struct {
	mu   sync.Mutex
	recs []string // "LEVEL message k=v ..."
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, b.String())
	c.mu.Unlock()
	return nil
}

// find returns the first record containing every part.
func (c *logCapture) find(parts ...string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
next:
	for _, r := range c.recs {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		return r, true
	}
	return "", false
}

// waitFor polls until a record contains every part, failing after 10 s.
func (c *logCapture) waitFor(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, ok := c.find(parts...); ok {
			return r
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("no log record with %q; have:\n%s", parts, strings.Join(c.recs, "\n"))
		}
		time.Sleep(time.Millisecond) // polling with a deadline, not synchronising
	}
}

func sameTree(t *testing.T, what string, got, want *tree) {
	t.Helper()
	if got.strs != want.strs || got.bytes != want.bytes ||
		!slices.Equal(got.ents, want.ents) || !slices.Equal(got.dirs, want.dirs) ||
		!slices.Equal(got.fileEnt, want.fileEnt) || !slices.Equal(got.fileVer, want.fileVer) ||
		!slices.Equal(got.links, want.links) {
		t.Fatalf("%s: trees differ:\n got %+v\nwant %+v", what, got, want)
	}
}

// storeTestTree has files, nested and empty directories and a symlink.
func storeTestTree(t *testing.T) *tree {
	t.Helper()
	listing, err := listAll(t.Context(), newFakeBackend(treeFiles), 2)
	if err != nil {
		t.Fatal(err)
	}
	listing[""] = append(listing[""],
		backend.Entry{Name: "link", Mode: iofs.ModeSymlink | 0o777, Target: "a/b"},
		backend.Entry{Name: "empty", Mode: iofs.ModeDir | 0o700, ModTime: time.Unix(5, 6)})
	tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir | 0o755, ModTime: time.Unix(7, 8)}, listing)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTreeStoreRoundTrip(t *testing.T) {
	tr := storeTestTree(t)
	name := filepath.Join(t.TempDir(), "ns", "tree") // the directory is made
	if err := saveTree(name, "fake://src", 12345, tr); err != nil {
		t.Fatal(err)
	}
	tf, err := loadTree(name, "fake://src")
	if err != nil {
		t.Fatal(err)
	}
	if tf.listedAt != 12345 || tf.source != "fake://src" {
		t.Errorf("listedAt %d source %q", tf.listedAt, tf.source)
	}
	sameTree(t, "loaded", tf.t, tr)
	if e, ok := tf.t.lookupPath("a/z/deep2"); !ok || tf.t.ents[e].size != 60 {
		t.Errorf("lookup in the loaded tree: %d %v", e, ok)
	}
	if tmp, _ := filepath.Glob(name + ".tmp-*"); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	// A crashed writer's old temporary file goes at the next save; a
	// recent one may be another mount's write in progress and stays.
	stale, fresh := name+".tmp-crashed", name+".tmp-writing"
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if err := saveTree(name, "fake://src", 12345, tr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("stale temporary file: %v, want removed", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("recent temporary file: %v, want kept", err)
	}
}

// reseal recomputes the checksum of a metadata file whose body a test
// changed, so that only the structural checks can refuse it.
func reseal(b []byte) []byte {
	body := b[:len(b)-4]
	return binary.LittleEndian.AppendUint32(body[:len(body):len(body)], crc32.Checksum(body, castagnoli))
}

func TestTreeStoreRefusesBadFiles(t *testing.T) {
	tr := storeTestTree(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := saveTree(good, "fake://src", 1, tr); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	srcOff := fixedHdrLen - 8 - 8 - 5*4 // start of the source name
	strsOff := fixedHdrLen + len("fake://src")
	entsOff := strsOff + len(tr.strs)
	ent := func(i, field int) int { return entsOff + i*entRecLen + field }
	patch := func(off int, v uint32) []byte {
		b := append([]byte(nil), raw...)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	flipped := func(off int) []byte {
		b := append([]byte(nil), raw...)
		b[off] ^= 0x10
		return b
	}
	a, _ := tr.lookupPath("a")
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, errTreeFormat},
		{"garbage", []byte(strings.Repeat("not a tree ", 20)), errTreeFormat},
		{"old format", patch(8, treeFormat-1), errTreeFormat},
		{"newer format", patch(8, treeFormat+1), errTreeFormat},
		{"foreign source", append(append(append([]byte(nil), raw[:srcOff]...), "fake://sRc"...), raw[srcOff+10:]...), errTreeSource},
		{"truncated in the header", raw[:30], errTreeCorrupt},
		{"truncated in the names", raw[:strsOff+3], errTreeCorrupt},
		{"truncated in the entries", raw[:entsOff+entRecLen+5], errTreeCorrupt},
		{"checksum cut off", raw[:len(raw)-2], errTreeCorrupt},
		{"one byte appended", append(append([]byte(nil), raw...), 0), errTreeCorrupt},
		{"bit flipped in a name", flipped(strsOff + 1), errTreeCorrupt},
		{"bit flipped in a size", flipped(ent(3, 8)), errTreeCorrupt},
		{"bit flipped in the checksum", flipped(len(raw) - 1), errTreeCorrupt},
		{"resealed: name out of the arena", reseal(patch(ent(2, 0), uint32(len(tr.strs)))), errTreeCorrupt},
		{"resealed: parent out of range", reseal(patch(ent(2, 28), 99)), errTreeCorrupt},
		{"resealed: file ID twice", reseal(patch(ent(int(tr.fileEnt[1]), 32), tr.ents[tr.fileEnt[0]].ref)), errTreeCorrupt},
		{"resealed: size changed", reseal(patch(ent(int(tr.fileEnt[0]), 8), 999)), errTreeCorrupt},
		{"resealed: directory is its own parent", reseal(patch(ent(int(a), 28), tr.ents[a].ref)), errTreeCorrupt},
		{"resealed: children unsorted", reseal(func() []byte {
			// Swap the names of the root's first two children.
			b := append([]byte(nil), raw...)
			x, y := ent(int(tr.dirs[0].first), 0), ent(int(tr.dirs[0].first)+1, 0)
			tmp := append([]byte(nil), b[x:x+8]...)
			copy(b[x:x+8], b[y:y+8])
			copy(b[y:y+8], tmp)
			return b
		}()), errTreeCorrupt},
	}
	for _, tc := range cases {
		name := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
		if err := os.WriteFile(name, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		tf, err := loadTree(name, "fake://src")
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: loadTree = %v, %v; want %v", tc.name, tf, err, tc.want)
		}
	}
	if _, err := loadTree(filepath.Join(dir, "missing"), "fake://src"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

// writeDirTree makes a source directory whose directories' times lie in
// 2020 (well before any listing).
func writeDirTree(t *testing.T, files map[string]int64) string {
	t.Helper()
	root := t.TempDir()
	for p, n := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		fillPat(b, seedOf(p), 0)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ageDirs(t, root)
	return root
}

func ageDirs(t *testing.T, root string) {
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

// dirTimesBackend says that its directory times track entries.
type dirTimesBackend struct{ dirBackend }

func (dirTimesBackend) DirTimesTrackEntries() bool { return true }

func TestReadTreeDirTimes(t *testing.T) {
	root := writeDirTree(t, treeFiles)
	logs := &logCapture{}
	opts := Options{MetadataFile: filepath.Join(t.TempDir(), "tree"), MetadataDirTimes: true, Logger: slog.New(logs)}.withDefaults()
	thr := throttle.New(dirBackend{root}, throttle.Options{})
	lists := func() int64 { return thr.Counters().ListCalls }

	first, err := readTree(t.Context(), thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	n1 := lists()
	if n1 == 0 {
		t.Fatal("first mount did not list")
	}
	logs.waitFor(t, "tree listed and persisted")

	second, err := readTree(t.Context(), thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if lists() != n1 {
		t.Errorf("unchanged source: %d List calls, want none", lists()-n1)
	}
	sameTree(t, "reloaded", second, first)
	logs.waitFor(t, "tree loaded from persisted metadata (directory times unchanged)")

	// A file added in a subdirectory changes only that directory's time.
	if err := os.WriteFile(filepath.Join(root, "a", "z", "new"), []byte("xyz"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := readTree(t.Context(), thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if lists() == n1 {
		t.Error("changed directory: no new listing")
	}
	if _, ok := third.lookupPath("a/z/new"); !ok {
		t.Error("new file missing after the re-list")
	}
	logs.waitFor(t, "persisted metadata out of date", "directory \"a/z\" changed")

	// That directory changed just before the listing, so the listing
	// cannot vouch for it: the next mount lists again (and so on until
	// the directory is older than modifiedMargin).
	n3 := lists()
	if _, err := readTree(t.Context(), thr, opts); err != nil {
		t.Fatal(err)
	}
	if lists() == n3 {
		t.Error("directory modified at the listing: persisted tree was trusted")
	}
	logs.waitFor(t, "modified during or after the listing")

	// A removed directory is noticed too.
	ageDirs(t, root)
	if _, err := readTree(t.Context(), thr, opts); err != nil { // lists: times changed
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	ageDirs(t, root) // the root's time is back as listed; b is gone
	got, err := readTree(t.Context(), thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.lookupPath("b"); ok {
		t.Error("removed directory still in the tree")
	}
	logs.waitFor(t, "directory \"b\" is gone")
}

func TestReadTreeDirTimesInterface(t *testing.T) {
	root := writeDirTree(t, treeFiles)
	logs := &logCapture{}
	opts := Options{MetadataFile: filepath.Join(t.TempDir(), "tree"), Logger: slog.New(logs)}.withDefaults()
	b := dirTimesBackend{dirBackend{root}}
	if _, err := readTree(t.Context(), b, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := readTree(t.Context(), b, opts); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "directory times unchanged")
	if _, ok := logs.find("background"); ok {
		t.Error("a DirTimesBackend got a background re-list")
	}
}

func TestReadTreeBackgroundRelist(t *testing.T) {
	files := map[string]int64{"c1/a": 10, "c1/b": 20, "c2/a": 30, "c2/b": 40}
	fake := newFakeBackend(files)
	thr := throttle.New(fake, throttle.Options{})
	logs := &logCapture{}
	opts := Options{MetadataFile: filepath.Join(t.TempDir(), "tree"), Logger: slog.New(logs)}.withDefaults()
	if _, err := readTree(t.Context(), thr, opts); err != nil {
		t.Fatal(err)
	}
	n1 := thr.Counters().ListCalls

	// The source changes: one object added (in a new directory: 2 names),
	// one removed, one rewritten.
	fake.mu.Lock()
	fake.files["c3/new"] = 1
	delete(fake.files, "c1/b")
	fake.files["c2/a"] = 31
	fake.mu.Unlock()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served, err := readTree(ctx, thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The persisted tree is served at once: the old names.
	if _, ok := served.lookupPath("c1/b"); !ok {
		t.Error("persisted tree not served")
	}
	logs.waitFor(t, "re-listing in the background")
	w := logs.waitFor(t, "WARN source changed since its metadata was persisted", "added=2", "removed=1", "changed=1")
	if !strings.Contains(w, "remount") {
		t.Errorf("warning does not say how to see the changes: %s", w)
	}
	logs.waitFor(t, "re-listed metadata persisted")
	if thr.Counters().ListCalls == n1 {
		t.Error("no background listing")
	}
	// The next mount serves the re-listed tree, and its own re-list finds
	// nothing new.
	next, err := readTree(ctx, thr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.lookupPath("c3/new"); !ok {
		t.Error("re-listed tree was not persisted")
	}
	logs.waitFor(t, "background re-list: persisted metadata is current")
}

func TestReadTreeIgnoresBadFileAndRewrites(t *testing.T) {
	files := map[string]int64{"x/1": 1, "x/2": 2}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated", nil}, // filled below from a good file
		{"garbage", []byte("STLFTREE but then nothing sensible")},
	} {
		thr := throttle.New(newFakeBackend(files), throttle.Options{})
		logs := &logCapture{}
		name := filepath.Join(t.TempDir(), "tree")
		opts := Options{MetadataFile: name, Logger: slog.New(logs)}.withDefaults()
		if tc.data == nil {
			if _, err := readTree(t.Context(), thr, opts); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			tc.data = raw[:len(raw)/2]
		}
		if err := os.WriteFile(name, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		before := thr.Counters().ListCalls
		tr, err := readTree(t.Context(), thr, opts)
		if err != nil {
			t.Fatal(err)
		}
		if tr.files() != 2 || thr.Counters().ListCalls == before {
			t.Errorf("%s: %d files, listed %v", tc.name, tr.files(), thr.Counters().ListCalls != before)
		}
		logs.waitFor(t, "persisted metadata ignored")
		if _, err := loadTree(name, thr.String()); err != nil {
			t.Errorf("%s: file not rewritten: %v", tc.name, err)
		}
	}
}

func TestDiffTrees(t *testing.T) {
	build := func(files map[string]int64) *tree {
		listing, err := listAll(t.Context(), newFakeBackend(files), 1)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := buildTree(backend.Entry{Mode: iofs.ModeDir}, listing)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a := build(map[string]int64{"d/1": 1, "d/2": 2, "e/3": 3})
	b := build(map[string]int64{"d/1": 1, "d/2": 5, "f/4": 4})
	if d := diffTrees(a, a); !d.none() {
		t.Errorf("same tree: %+v", d)
	}
	// e/3 and e removed; f/4 and f added; d/2 changed.
	if d := diffTrees(a, b); d != (treeDiff{added: 2, removed: 2, changed: 1}) {
		t.Errorf("diff = %+v", d)
	}
}
