package listwalk

// Tests of the parallel walk's plan and runner against a fake store of
// sorted keys. This file is the same in backend/s3 and backend/azblob but
// for the package clause.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeStore lists sorted keys the way an object store does.
type fakeStore struct {
	keys     []string // sorted
	pageSize int
	// failAt, when set, fails every flat listing at the page that holds
	// a key below it.
	failAt string
	// giveUp names the levels whose delimited listing is too large.
	giveUp map[string]bool

	levels atomic.Int64 // delimited listings
	flats  atomic.Int64 // flat listings
	mu     sync.Mutex
	roots  int // flat listings of "" (guarded by mu)
}

var errFake = errors.New("fake listing failure")

func (s *fakeStore) level(ctx context.Context, prefix string, maxObjs, maxPrefixes int) ([]string, []string, bool, error) {
	s.levels.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, nil, false, err
	}
	if s.giveUp[prefix] {
		return nil, nil, false, nil
	}
	var objs, prefixes []string
	for _, k := range s.keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p := prefix + rest[:i+1]
			if len(prefixes) == 0 || prefixes[len(prefixes)-1] != p {
				prefixes = append(prefixes, p)
			}
			continue
		}
		objs = append(objs, k)
	}
	if len(objs) > maxObjs || len(prefixes) > maxPrefixes {
		return nil, nil, false, nil
	}
	// A store returns a level's objects in order, and may repeat a name
	// on two pages; the plan must depend on neither.
	slices.Reverse(objs)
	if len(prefixes) > 0 {
		prefixes = append(prefixes, prefixes[0])
	}
	if len(objs) > 0 {
		objs = append(objs, objs[0])
	}
	return objs, prefixes, true, nil
}

func (s *fakeStore) flat(ctx context.Context, prefix string, page func([]string) error) error {
	s.flats.Add(1)
	if prefix == "" {
		s.mu.Lock()
		s.roots++
		s.mu.Unlock()
	}
	var keys []string
	for _, k := range s.keys {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	for len(keys) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(s.pageSize, len(keys))
		for _, k := range keys[:n] {
			if s.failAt != "" && strings.HasPrefix(k, s.failAt) {
				return fmt.Errorf("walk %q: %w", prefix, errFake)
			}
		}
		if err := page(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

func identity(k string) string { return k }

func (s *fakeStore) spec(root string, conc int) Spec[string] {
	return Spec[string]{Root: root, Conc: conc, PageKeys: s.pageSize, Level: s.level, Flat: s.flat, Key: identity}
}

// walkFake walks root over s and returns the keys emitted, in order.
func walkFake(t *testing.T, s *fakeStore, root string, conc int) ([]string, error) {
	t.Helper()
	var got []string
	err := Walk(t.Context(), s.spec(root, conc), func(k string) error {
		got = append(got, k)
		return nil
	})
	return got, err
}

// imagenetKeys is a small ImageNet layout with names that sort around
// the slash, markers and a name that is both a file and a prefix.
func imagenetKeys(classes, perClass int) []string {
	keys := []string{"README", "a", "a-1", "a.txt", "a/b", "m/", "n/", "n/file", "x//y", "deep/1/2/3/4"}
	for _, split := range []string{"train", "val"} {
		for c := range classes {
			for i := range perClass {
				keys = append(keys, fmt.Sprintf("%s/n%03d/img%04d.JPEG", split, c, i))
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func TestPlanWalkEmitsFlatOrder(t *testing.T) {
	keys := imagenetKeys(20, 7)
	for _, root := range []string{"", "train/", "deep/", "n/", "zzz/"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, root) {
				want = append(want, k)
			}
		}
		for _, conc := range []int{2, 3, 16, 64} {
			s := &fakeStore{keys: keys, pageSize: 3}
			got, err := walkFake(t, s, root, conc)
			if err != nil {
				t.Fatalf("walk %q conc %d: %v", root, conc, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("walk %q conc %d emitted\n%q\nwant the flat listing\n%q", root, conc, got, want)
			}
		}
	}
}

func TestPlanWalkStopsAtEnoughPrefixes(t *testing.T) {
	s := &fakeStore{keys: imagenetKeys(20, 2), pageSize: 1000}
	segs, err := planWalk(t.Context(), "", 16, s.level, identity)
	if err != nil {
		t.Fatal(err)
	}
	var prefixes []string
	for _, sg := range segs {
		if sg.list {
			prefixes = append(prefixes, sg.prefix)
		}
	}
	// The root has 7 prefixes (< 16): one more level is planned, which
	// gives deep/1/, the 40 classes and x//, and no more levels.
	if len(prefixes) != 42 || prefixes[0] != "deep/1/" || prefixes[1] != "train/n000/" || prefixes[41] != "x//" {
		t.Errorf("planned prefixes %q: want deep/1/, the 40 classes, x//", prefixes)
	}
	if got := s.levels.Load(); got != 1+7 {
		t.Errorf("%d delimited listings, want 8 (the root and its 7 prefixes)", got)
	}
}

func TestPlanWalkGivesUpOnLargeLevels(t *testing.T) {
	keys := imagenetKeys(4, 3)
	s := &fakeStore{keys: keys, pageSize: 2, giveUp: map[string]bool{"": true}}
	segs, err := planWalk(t.Context(), "", 8, s.level, identity)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || !segs[0].list || segs[0].prefix != "" {
		t.Errorf("plan of a root too large to hold = %+v, want one flat listing of the root", segs)
	}
	// A level below that gives up is listed flat and not asked again.
	s = &fakeStore{keys: keys, pageSize: 2, giveUp: map[string]bool{"train/": true}}
	got, err := walkFake(t, s, "", 64)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, keys) {
		t.Errorf("walk emitted %q\nwant %q", got, keys)
	}
	if n := s.levels.Load(); n != 1+7+6 {
		// The root; its 7 prefixes; then val/'s 4 classes, deep/1/ and
		// x//: train/ is not asked again, the rest have no prefixes.
		t.Errorf("%d delimited listings, want 14", n)
	}
}

func TestRunSegmentsFailingPrefixFailsWalk(t *testing.T) {
	keys := imagenetKeys(30, 2)
	for _, conc := range []int{2, 16} {
		s := &fakeStore{keys: keys, pageSize: 1, failAt: "train/n017/"}
		got, err := walkFake(t, s, "", conc)
		if !errors.Is(err, errFake) {
			t.Errorf("conc %d: walk with a failing prefix = %v, want its error", conc, err)
		}
		for _, k := range got {
			if k >= "train/n017/" {
				t.Errorf("conc %d: emitted %q, which comes after the failed prefix", conc, k)
				break
			}
		}
	}
}

func TestRunSegmentsEmitErrorStops(t *testing.T) {
	s := &fakeStore{keys: imagenetKeys(30, 3), pageSize: 2}
	segs, err := planWalk(t.Context(), "", 8, s.level, identity)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	calls := 0
	_, _, err = runSegments(t.Context(), s.spec("", 8), segs, func(string) error {
		calls++
		if calls == 50 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 50 {
		t.Errorf("runSegments = %v after %d calls, want stop after 50", err, calls)
	}
}

func TestRunSegmentsListsInParallelWithinBound(t *testing.T) {
	const conc = 4
	var segs []segment[string]
	for i := range 12 {
		segs = append(segs, segment[string]{prefix: fmt.Sprintf("p%02d/", i), list: true})
	}
	var (
		mu       sync.Mutex
		inFlight int
		most     int
		started  = make(chan struct{}, len(segs))
		release  = make(chan struct{})
	)
	flat := func(ctx context.Context, prefix string, page func([]string) error) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return page([]string{prefix + "x"})
	}
	done := make(chan error, 1)
	var got []string
	go func() {
		spec := Spec[string]{Conc: conc, Flat: flat, Key: identity} // pageKeys 0: never turns flat
		_, _, err := runSegments(t.Context(), spec, segs, func(k string) error {
			got = append(got, k)
			return nil
		})
		done <- err
	}()
	// conc listings start before any returns.
	deadline := time.After(10 * time.Second)
	for range conc {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("fewer than %d listings started at once", conc)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if most != conc {
		t.Errorf("at most %d listings ran at once, want %d", most, conc)
	}
	if len(got) != len(segs) || !slices.IsSorted(got) {
		t.Errorf("emitted %q, want one key per prefix in order", got)
	}
}

func TestParallelWalkTurnsFlatOnSmallPrefixes(t *testing.T) {
	const conc = 8
	for _, tc := range []struct {
		perClass int
		flat     bool
	}{
		{2, true},   // 8 prefixes of 2 keys: less than a page of 100
		{20, false}, // 160 keys: more than a page
	} {
		keys := imagenetKeys(100, tc.perClass)
		s := &fakeStore{keys: keys, pageSize: 100}
		got, err := walkFake(t, s, "", conc)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("%d keys a class: walk emitted %d keys, want the %d of the flat listing", tc.perClass, len(got), len(keys))
		}
		s.mu.Lock()
		roots := s.roots
		s.mu.Unlock()
		flats := s.flats.Load()
		switch {
		case tc.flat && (roots != 1 || flats > 2*conc+1):
			t.Errorf("%d keys a class: %d flat listings, %d of the root; want the root once after at most %d prefixes",
				tc.perClass, flats, roots, 2*conc)
		case !tc.flat && (roots != 0 || flats != 200+2):
			t.Errorf("%d keys a class: %d flat listings, %d of the root; want one per prefix (202), none of the root",
				tc.perClass, flats, roots)
		}
	}
}
