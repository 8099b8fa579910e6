package prefetch

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A track follows one reader (one rank's sampler) through its predicted
// order and issues Warm calls ahead of it. Every method runs with the
// prefetcher's mu held, on Run's goroutine or in a setter.
type track struct {
	p    *Prefetcher // immutable
	name string      // immutable: "rank 3", or "" for a single reader

	order      Order
	gen        int // bumped on every reset of issuing; older results are ignored
	cur        epochTrack
	curErr     error // the current epoch's order could not be had
	nextHead   map[int]int
	nextErr    error
	searching  bool // no read matched since (re)start: look in the whole epoch
	frozen     int  // >= 0: every epoch repeats this order epoch
	ring       matchRing
	disabled   string
	stats      map[int]*EpochStats
	issueEpoch int
	issuePos   int
	issueOrder []int
	issueBase  int64
	issueErr   error
	dq         []issued
	dqStart    int64
	leadBytes  int64
	inflight   int
}

func newTrack(p *Prefetcher, name string) *track {
	return &track{p: p, name: name, stats: make(map[int]*EpochStats), ring: matchRing{ring: make([]bool, p.opts.CheckReads)}, frozen: -1}
}

// orderEpoch returns the order the tracker predicts for epoch e.
func (t *track) orderEpoch(e int) ([]int, error) {
	if t.order == nil {
		return nil, errors.New("no order set")
	}
	if t.order.Len() != t.p.layout.Len() {
		return nil, fmt.Errorf("order is for %d items, layout has %d", t.order.Len(), t.p.layout.Len())
	}
	if t.frozen >= 0 {
		e = t.frozen
	}
	o, err := t.order.Epoch(e)
	if err != nil {
		return nil, fmt.Errorf("order of epoch %d: %w", e, err)
	}
	return o, nil
}

// setOrder installs o and restarts tracking in epoch e.
func (t *track) setOrder(o Order, e int) {
	t.order = o
	t.frozen = -1
	t.disabled = ""
	t.searching = true
	t.ring.clear()
	t.loadCur(e, 0)
	t.resetIssue()
}

// loadCur points the tracker at epoch e starting at global position base.
func (t *track) loadCur(e int, base int64) {
	o, err := t.orderEpoch(e)
	t.curErr = err
	if err != nil {
		o = nil
	}
	t.cur.reset(e, o, base, t.p.layout.Len())
	t.stat(e).Predicted = len(o)
	t.nextHead, t.nextErr = nil, nil
	t.loadNextHead()
}

// loadNextHead maps the first Window indices of the next epoch's order to
// their positions, to notice the reader moving on.
func (t *track) loadNextHead() {
	if t.curErr != nil {
		return
	}
	o, err := t.orderEpoch(t.cur.epoch + 1)
	t.nextErr = err
	if err != nil {
		return
	}
	w := min(len(o), t.p.opts.Window)
	t.nextHead = make(map[int]int, w)
	for q := range w {
		if _, ok := t.nextHead[o[q]]; !ok {
			t.nextHead[o[q]] = q
		}
	}
}

// retryOrders retries orders that were missing (a List epoch that has
// since been pushed).
func (t *track) retryOrders() {
	if t.curErr != nil {
		t.loadCur(t.cur.epoch, t.cur.base)
		t.resetIssue()
		return
	}
	if t.nextErr != nil {
		t.loadNextHead()
	}
	t.issueErr = nil
}

// resetIssue restarts issuing at the reader's position.
func (t *track) resetIssue() {
	t.gen++
	t.issueEpoch, t.issuePos, t.issueOrder, t.issueBase = t.cur.epoch, t.cur.pos, t.cur.order, t.cur.base
	t.issueErr = nil
	t.dq = t.dq[:0]
	t.dqStart = t.cur.global()
	t.leadBytes = 0
}

func (t *track) stat(e int) *EpochStats {
	st, ok := t.stats[e]
	if !ok {
		st = &EpochStats{Epoch: e}
		t.stats[e] = st
		for len(t.stats) > t.p.opts.KeepEpochs {
			oldest := e
			for k := range t.stats {
				oldest = min(oldest, k)
			}
			delete(t.stats, oldest)
		}
	}
	return st
}

// lead is how many items are issued ahead of the reader.
func (t *track) lead() int {
	return int(max(t.issueBase+int64(t.issuePos)-t.cur.global(), 0))
}

// canIssue reports whether the track may issue one more Warm call.
func (t *track) canIssue() bool {
	if t.disabled != "" || t.curErr != nil || t.issueErr != nil {
		return false
	}
	o := t.p.opts
	if o.NextEpochAhead >= 0 && t.issueBase+int64(t.issuePos) >= t.cur.base+int64(len(t.cur.order))+int64(o.NextEpochAhead) {
		return false // far enough into the next epoch until the reader is there
	}
	return t.lead() < o.Ahead && (o.AheadBytes <= 0 || t.leadBytes < o.AheadBytes)
}

// issueOne issues the next Warm call, if any; ok is false when the track
// has nothing to issue now.
func (t *track) issueOne() (j job, ok bool) {
	if t.issueBase+int64(t.issuePos) < t.cur.global() {
		t.resetIssue()
	}
	for t.canIssue() {
		g := t.issueBase + int64(t.issuePos)
		lead := t.lead()
		if t.issuePos >= len(t.issueOrder) {
			o, err := t.orderEpoch(t.issueEpoch + 1)
			if err != nil {
				t.issueErr = err
				return job{}, false
			}
			t.issueBase += int64(len(t.issueOrder))
			t.issueEpoch, t.issuePos, t.issueOrder = t.issueEpoch+1, 0, o
			continue
		}
		q := t.issuePos
		t.issuePos++
		if t.issueEpoch == t.cur.epoch && t.cur.isSeen(q) {
			t.dq = append(t.dq, issued{done: true, observed: true})
			continue
		}
		path := t.p.layout.Path(t.issueOrder[q])
		var size int64
		if t.p.sizer != nil {
			size, _ = t.p.sizer.Size(path)
		}
		t.dq = append(t.dq, issued{size: size})
		t.leadBytes += size
		t.inflight++
		st := t.stat(t.issueEpoch)
		st.Issued++
		st.MaxLead = max(st.MaxLead, lead+1)
		return job{track: t, gen: t.gen, epoch: t.issueEpoch, g: g, path: path}, true
	}
	return job{}, false
}

// entry returns the issued entry of global position g, if any.
func (t *track) entry(g int64) *issued {
	if g < t.dqStart || g >= t.dqStart+int64(len(t.dq)) {
		return nil
	}
	return &t.dq[g-t.dqStart]
}

// pop drops the entries the reader has passed.
func (t *track) pop() {
	reader := t.cur.global()
	n := 0
	for n < len(t.dq) && t.dqStart+int64(n) < reader {
		t.leadBytes -= t.dq[n].size
		n++
	}
	if n > 0 {
		t.dq = append(t.dq[:0], t.dq[n:]...)
		t.dqStart += int64(n)
	}
}

func (t *track) complete(r result) {
	t.inflight--
	st := t.stat(r.epoch)
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		st.Errors++
		if st.Errors == 1 {
			t.p.log.Warn("prefetch: warm failed", "reader", t.name, "epoch", r.epoch, "path", r.path, "err", r.err)
		}
	}
	if r.fetched {
		st.Fetched++
	}
	if r.gen != t.gen {
		return
	}
	e := t.entry(r.g)
	if e == nil {
		return
	}
	e.done, e.fetched = true, r.fetched
	if e.observed {
		if r.fetched {
			st.Late++
		} else if r.err == nil {
			st.Cached++
		}
	}
}

// near returns the unread position of idx within the window of the
// reader's position, or -1.
func (t *track) near(idx int) int {
	if t.curErr != nil {
		return -1
	}
	return t.cur.find(idx, t.cur.pos, t.cur.pos+t.p.opts.Window)
}

// matchFar applies the rules for a read outside the window: the first
// read after a (re)start, a hole left by lost observations, the next
// epoch, or the same order again.
func (t *track) matchFar(idx int) bool {
	if t.curErr != nil {
		return false
	}
	c := &t.cur
	w := t.p.opts.Window
	n := len(c.order)
	if t.searching {
		if q := c.find(idx, 0, n); q >= 0 {
			c.skipTo(q)
			t.match(q)
			return true
		}
	}
	// Reads may have gone on without us seeing some of them (a dropped
	// observation): if most of the window is read, move past the hole.
	if q := c.find(idx, c.pos+w, c.pos+2*w); q >= 0 && c.seenIn(c.pos, c.pos+w) >= w/2 {
		t.stat(c.epoch).Skipped += int64(c.skipTo(q - w + 1))
		t.match(q)
		return true
	}
	nearEnd := c.pos >= n-2*w
	if q, ok := t.nextHead[idx]; ok && nearEnd {
		t.advance()
		t.match(q)
		return true
	}
	// The reader started this epoch's order over: the job reads the same
	// order every epoch (DistributedSampler without set_epoch).
	if q := c.findAny(idx, 0, min(w, n)); q >= 0 && nearEnd && t.frozen < 0 {
		t.frozen = c.epoch
		t.p.log.Warn("prefetch: the job repeats the same order every epoch (DistributedSampler without set_epoch?); predicting that", "reader", t.name, "epoch", c.epoch)
		t.advance()
		t.resetIssue() // what was issued ahead assumed a new order
		t.match(q)
		return true
	}
	return false
}

// owns reports whether idx is in the track's current epoch at all.
func (t *track) owns(idx int) bool {
	return t.curErr == nil && t.cur.first[idx] >= 0
}

// miss counts a read that matched nowhere.
func (t *track) miss(idx int) {
	c := &t.cur
	st := t.stat(c.epoch)
	st.Observed++
	if t.curErr == nil && c.findAny(idx, max(c.pos-t.p.opts.Window, 0), c.pos+t.p.opts.Window) >= 0 {
		st.Repeated++ // read again: neither a hit nor a miss of the prediction
		return
	}
	st.Unmatched++
	t.check(false)
}

// advance moves the tracker to the next epoch.
func (t *track) advance() {
	c := &t.cur
	t.stat(c.epoch).Skipped += int64(c.skipTo(len(c.order)))
	t.pop()
	t.loadCur(c.epoch+1, c.base+int64(len(c.order)))
}

func (t *track) match(q int) {
	c := &t.cur
	g := c.base + int64(q)
	st := t.stat(c.epoch)
	st.Observed++
	st.Matched++
	t.searching = false
	if e := t.entry(g); e != nil {
		if !e.observed {
			e.observed = true
			t.leadBytes -= e.size
			e.size = 0
			if e.done {
				if e.fetched {
					st.Hidden++
				} else {
					st.Cached++
				}
			}
		}
	} else if g >= t.issueBase+int64(t.issuePos) {
		st.NotIssued++
	}
	c.mark(q)
	t.pop()
	t.check(true)
}

// check records whether a read matched and stops prefetching when too
// few of the recent ones did.
func (t *track) check(ok bool) {
	t.ring.add(ok)
	r := &t.ring
	if t.disabled != "" || r.filled < len(r.ring) {
		return
	}
	if rate := float64(r.matched) / float64(r.filled); rate < t.p.opts.MinMatchRate {
		t.disabled = fmt.Sprintf("only %d of the last %d reads matched the predicted order (epoch %d, position %d); the seed, sampler or layout is probably not the job's",
			r.matched, r.filled, t.cur.epoch, t.cur.pos)
		if t.curErr != nil {
			t.disabled += ": " + t.curErr.Error()
		}
		t.p.log.Warn("prefetch: prediction does not match the reads; prefetching stopped", "reader", t.name, "reason", t.disabled)
		t.gen++ // in-flight results no longer count
		t.dq, t.leadBytes = t.dq[:0], 0
	}
}

// observeLocked follows one read: the track whose window holds it takes
// it; else a track that can explain it by a jump; else it is a miss of
// every track whose epoch holds the item (of every track when none does).
func (p *Prefetcher) observeLocked(path string) {
	idx, ok := p.layout.Index(strings.TrimPrefix(path, "/"))
	if !ok {
		for _, t := range p.tracks {
			t.stat(t.cur.epoch).Foreign++
		}
		return
	}
	// Readers in different epochs can both expect a file: the one that
	// expects it soonest takes it.
	var best *track
	bestQ, bestD := -1, 0
	for _, t := range p.tracks {
		if q := t.near(idx); q >= 0 && (best == nil || q-t.cur.pos < bestD) {
			best, bestQ, bestD = t, q, q-t.cur.pos
		}
	}
	if best != nil {
		best.match(bestQ)
		return
	}
	for _, t := range p.tracks {
		if t.matchFar(idx) {
			return
		}
	}
	owned := false
	for _, t := range p.tracks {
		if t.owns(idx) || t.curErr != nil {
			owned = true
			t.miss(idx)
		}
	}
	if !owned {
		for _, t := range p.tracks {
			t.miss(idx)
		}
	}
}

// issueLocked appends the Warm calls to start now to send: the track with
// the smallest lead goes first, within the shared Concurrency.
func (p *Prefetcher) issueLocked(send []job) []job {
	for p.inflight < p.opts.Concurrency {
		best := -1
		for i, t := range p.tracks {
			if t.canIssue() && (best < 0 || t.lead() < p.tracks[best].lead()) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		j, ok := p.tracks[best].issueOne()
		if !ok {
			continue // the track stopped itself (issueErr or bounds)
		}
		p.inflight++
		send = append(send, j)
	}
	return send
}
