package prefetch

// epochTrack follows the reader through one epoch's predicted order.
// Positions are indices into order; pos is the lowest position not yet
// observed (or skipped). Not safe for concurrent use: the prefetcher's
// loop owns it.
type epochTrack struct {
	epoch int
	order []int
	base  int64 // global position of order[0]: the sum of earlier epochs' lengths

	first   []int32  // per dataset index: its first position in order, or -1
	nextOcc []int32  // per position: the next position holding the same index, or -1
	seen    []uint64 // bitmap over positions
	pos     int
}

// reset points t at a new epoch, reusing its buffers. n is the dataset
// size.
func (t *epochTrack) reset(epoch int, order []int, base int64, n int) {
	t.epoch, t.order, t.base, t.pos = epoch, order, base, 0
	if cap(t.first) < n {
		t.first = make([]int32, n)
	}
	t.first = t.first[:n]
	for i := range t.first {
		t.first[i] = -1
	}
	if cap(t.nextOcc) < len(order) {
		t.nextOcc = make([]int32, len(order))
	}
	t.nextOcc = t.nextOcc[:len(order)]
	for p := len(order) - 1; p >= 0; p-- {
		x := order[p]
		t.nextOcc[p] = t.first[x]
		t.first[x] = int32(p)
	}
	words := (len(order) + 63) / 64
	if cap(t.seen) < words {
		t.seen = make([]uint64, words)
	}
	t.seen = t.seen[:words]
	clear(t.seen)
}

func (t *epochTrack) isSeen(p int) bool { return t.seen[p/64]&(1<<(p%64)) != 0 }

func (t *epochTrack) mark(p int) {
	t.seen[p/64] |= 1 << (p % 64)
	for t.pos < len(t.order) && t.isSeen(t.pos) {
		t.pos++
	}
}

// find returns the first unseen position of index x in [lo, hi), or -1.
func (t *epochTrack) find(x, lo, hi int) int {
	if x < 0 || x >= len(t.first) {
		return -1
	}
	for p := int(t.first[x]); p >= 0 && p < hi; p = int(t.nextOcc[p]) {
		if p >= lo && !t.isSeen(p) {
			return p
		}
	}
	return -1
}

// findAny returns the first position of index x in [lo, hi), seen or
// not, or -1.
func (t *epochTrack) findAny(x, lo, hi int) int {
	if x < 0 || x >= len(t.first) {
		return -1
	}
	for p := int(t.first[x]); p >= 0 && p < hi; p = int(t.nextOcc[p]) {
		if p >= lo {
			return p
		}
	}
	return -1
}

// seenIn counts the observed positions in [lo, hi).
func (t *epochTrack) seenIn(lo, hi int) int {
	hi = min(hi, len(t.order))
	n := 0
	for p := lo; p < hi; p++ {
		if t.isSeen(p) {
			n++
		}
	}
	return n
}

// skipTo declares every position below p passed (never read, or read
// without being observed).
func (t *epochTrack) skipTo(p int) int {
	skipped := 0
	for ; t.pos < p; t.pos++ {
		if !t.isSeen(t.pos) {
			skipped++
			t.seen[t.pos/64] |= 1 << (t.pos % 64)
		}
	}
	for t.pos < len(t.order) && t.isSeen(t.pos) {
		t.pos++
	}
	return skipped
}

// global is the global position of the reader.
func (t *epochTrack) global() int64 { return t.base + int64(t.pos) }

// matchRing remembers whether each of the last len(ring) observations
// matched the prediction.
type matchRing struct {
	ring    []bool
	next    int
	filled  int
	matched int
}

func (r *matchRing) add(ok bool) {
	if r.filled == len(r.ring) {
		if r.ring[r.next] {
			r.matched--
		}
	} else {
		r.filled++
	}
	r.ring[r.next] = ok
	if ok {
		r.matched++
	}
	r.next = (r.next + 1) % len(r.ring)
}

func (r *matchRing) clear() {
	clear(r.ring)
	r.next, r.filled, r.matched = 0, 0, 0
}
