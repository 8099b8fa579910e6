package prefetch

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// This file holds the prefetcher's state machine. Every method ends in
// Locked: it runs with p.mu held, on Run's goroutine or in a setter.

// orderEpochLocked returns the order the tracker predicts for epoch e.
func (p *Prefetcher) orderEpochLocked(e int) ([]int, error) {
	if p.order == nil {
		return nil, errors.New("no order set")
	}
	if p.order.Len() != p.layout.Len() {
		return nil, fmt.Errorf("order is for %d items, layout has %d", p.order.Len(), p.layout.Len())
	}
	if p.frozen >= 0 {
		e = p.frozen
	}
	o, err := p.order.Epoch(e)
	if err != nil {
		return nil, fmt.Errorf("order of epoch %d: %w", e, err)
	}
	return o, nil
}

// setOrderLocked installs o and restarts tracking in epoch e.
func (p *Prefetcher) setOrderLocked(o Order, e int) {
	p.order = o
	p.gen++
	p.frozen = -1
	p.disabled = ""
	p.searching = true
	p.ring.clear()
	p.cur = epochTrack{epoch: e, first: p.cur.first, nextOcc: p.cur.nextOcc, seen: p.cur.seen}
	p.cur.order, p.curErr, p.nextHead = nil, nil, nil
	p.loadCurLocked(e, 0)
	p.resetIssueLocked()
}

// loadCurLocked points the tracker at epoch e starting at global position
// base.
func (p *Prefetcher) loadCurLocked(e int, base int64) {
	o, err := p.orderEpochLocked(e)
	p.curErr = err
	if err != nil {
		o = nil
	}
	p.cur.reset(e, o, base, p.layout.Len())
	p.statLocked(e).Predicted = len(o)
	p.nextHead, p.nextErr = nil, nil
	p.loadNextHeadLocked()
}

// loadNextHeadLocked maps the first Window indices of the next epoch's
// order to their positions, to notice the reader moving on.
func (p *Prefetcher) loadNextHeadLocked() {
	if p.curErr != nil {
		return
	}
	o, err := p.orderEpochLocked(p.cur.epoch + 1)
	p.nextErr = err
	if err != nil {
		return
	}
	p.nextHead = make(map[int]int, min(len(o), p.opts.Window))
	for q := range min(len(o), p.opts.Window) {
		if _, ok := p.nextHead[o[q]]; !ok {
			p.nextHead[o[q]] = q
		}
	}
}

// retryOrdersLocked retries orders that were missing (a List epoch that
// has since been pushed).
func (p *Prefetcher) retryOrdersLocked() {
	if p.curErr != nil {
		p.loadCurLocked(p.cur.epoch, p.cur.base)
		p.resetIssueLocked()
		return
	}
	if p.nextErr != nil {
		p.loadNextHeadLocked()
	}
	p.issueErr = nil
}

// resetIssueLocked restarts issuing at the reader's position.
func (p *Prefetcher) resetIssueLocked() {
	p.gen++
	p.issueEpoch, p.issuePos, p.issueOrder, p.issueBase = p.cur.epoch, p.cur.pos, p.cur.order, p.cur.base
	p.issueErr = nil
	p.dq = p.dq[:0]
	p.dqStart = p.cur.global()
	p.leadBytes = 0
}

func (p *Prefetcher) statLocked(e int) *EpochStats {
	st, ok := p.stats[e]
	if !ok {
		st = &EpochStats{Epoch: e}
		p.stats[e] = st
		for len(p.stats) > p.opts.KeepEpochs {
			oldest := e
			for k := range p.stats {
				oldest = min(oldest, k)
			}
			delete(p.stats, oldest)
		}
	}
	return st
}

// issueLocked appends the Warm calls to start now to send.
func (p *Prefetcher) issueLocked(send []job) []job {
	if p.disabled != "" || p.curErr != nil {
		return send
	}
	reader := p.cur.global()
	if p.issueBase+int64(p.issuePos) < reader {
		p.resetIssueLocked()
	}
	for p.inflight < p.opts.Concurrency && p.issueErr == nil {
		g := p.issueBase + int64(p.issuePos)
		lead := int(g - reader)
		if lead >= p.opts.Ahead || p.opts.AheadBytes > 0 && p.leadBytes >= p.opts.AheadBytes {
			break
		}
		if p.issuePos >= len(p.issueOrder) {
			o, err := p.orderEpochLocked(p.issueEpoch + 1)
			if err != nil {
				p.issueErr = err
				break
			}
			p.issueBase += int64(len(p.issueOrder))
			p.issueEpoch, p.issuePos, p.issueOrder = p.issueEpoch+1, 0, o
			continue
		}
		q := p.issuePos
		p.issuePos++
		if p.issueEpoch == p.cur.epoch && p.cur.isSeen(q) {
			p.dq = append(p.dq, issued{done: true, observed: true})
			continue
		}
		path := p.layout.Path(p.issueOrder[q])
		var size int64
		if p.sizer != nil {
			size, _ = p.sizer.Size(path)
		}
		p.dq = append(p.dq, issued{size: size})
		p.leadBytes += size
		p.inflight++
		st := p.statLocked(p.issueEpoch)
		st.Issued++
		st.MaxLead = max(st.MaxLead, lead+1)
		send = append(send, job{gen: p.gen, epoch: p.issueEpoch, g: g, path: path})
	}
	return send
}

// entryLocked returns the issued entry of global position g, if any.
func (p *Prefetcher) entryLocked(g int64) *issued {
	if g < p.dqStart || g >= p.dqStart+int64(len(p.dq)) {
		return nil
	}
	return &p.dq[g-p.dqStart]
}

// popLocked drops the entries the reader has passed.
func (p *Prefetcher) popLocked() {
	reader := p.cur.global()
	n := 0
	for n < len(p.dq) && p.dqStart+int64(n) < reader {
		p.leadBytes -= p.dq[n].size
		n++
	}
	if n > 0 {
		p.dq = append(p.dq[:0], p.dq[n:]...)
		p.dqStart += int64(n)
	}
}

func (p *Prefetcher) completeLocked(r result) {
	p.inflight--
	st := p.statLocked(r.epoch)
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		st.Errors++
		if st.Errors == 1 {
			p.log.Warn("prefetch: warm failed", "epoch", r.epoch, "path", r.path, "err", r.err)
		}
	}
	if r.fetched {
		st.Fetched++
	}
	if r.gen != p.gen {
		return
	}
	e := p.entryLocked(r.g)
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

// observeLocked follows one read.
func (p *Prefetcher) observeLocked(path string) {
	idx, ok := p.layout.Index(strings.TrimPrefix(path, "/"))
	if !ok {
		p.statLocked(p.cur.epoch).Foreign++
		return
	}
	st := p.statLocked(p.cur.epoch)
	if p.curErr != nil {
		st.Observed++
		st.Unmatched++
		p.checkLocked(false)
		return
	}
	c := &p.cur
	w := p.opts.Window
	n := len(c.order)
	if q := c.find(idx, c.pos, c.pos+w); q >= 0 {
		p.matchLocked(q)
		return
	}
	if p.searching {
		if q := c.find(idx, 0, n); q >= 0 {
			c.skipTo(q)
			p.matchLocked(q)
			return
		}
	}
	// Reads may have gone on without us seeing some of them (a dropped
	// observation): if most of the window is read, move past the hole.
	if q := c.find(idx, c.pos+w, c.pos+2*w); q >= 0 && c.seenIn(c.pos, c.pos+w) >= w/2 {
		st.Skipped += int64(c.skipTo(q - w + 1))
		p.matchLocked(q)
		return
	}
	nearEnd := c.pos >= n-2*w
	if q, ok := p.nextHead[idx]; ok && nearEnd {
		p.advanceLocked()
		p.matchLocked(q)
		return
	}
	// The reader started this epoch's order over: the job reads the same
	// order every epoch (DistributedSampler without set_epoch).
	if q := c.findAny(idx, 0, min(w, n)); q >= 0 && nearEnd && p.frozen < 0 {
		p.frozen = c.epoch
		p.log.Warn("prefetch: the job repeats the same order every epoch (DistributedSampler without set_epoch?); predicting that", "epoch", c.epoch)
		p.advanceLocked()
		p.resetIssueLocked() // what was issued ahead assumed a new order
		p.matchLocked(q)
		return
	}
	st.Observed++
	if c.findAny(idx, max(c.pos-w, 0), c.pos+w) >= 0 {
		st.Repeated++ // read again: neither a hit nor a miss of the prediction
		return
	}
	st.Unmatched++
	p.checkLocked(false)
}

// advanceLocked moves the tracker to the next epoch.
func (p *Prefetcher) advanceLocked() {
	c := &p.cur
	st := p.statLocked(c.epoch)
	st.Skipped += int64(c.skipTo(len(c.order)))
	p.popLocked()
	p.loadCurLocked(c.epoch+1, c.base+int64(len(c.order)))
}

func (p *Prefetcher) matchLocked(q int) {
	c := &p.cur
	g := c.base + int64(q)
	st := p.statLocked(c.epoch)
	st.Observed++
	st.Matched++
	p.searching = false
	if e := p.entryLocked(g); e != nil {
		if !e.observed {
			e.observed = true
			p.leadBytes -= e.size
			e.size = 0
			if e.done {
				if e.fetched {
					st.Hidden++
				} else {
					st.Cached++
				}
			}
		}
	} else if g >= p.issueBase+int64(p.issuePos) {
		st.NotIssued++
	}
	c.mark(q)
	p.popLocked()
	p.checkLocked(true)
}

// checkLocked records whether a read matched and stops prefetching when
// too few of the recent ones did.
func (p *Prefetcher) checkLocked(ok bool) {
	p.ring.add(ok)
	r := &p.ring
	if p.disabled != "" || r.filled < len(r.ring) {
		return
	}
	if rate := float64(r.matched) / float64(r.filled); rate < p.opts.MinMatchRate {
		p.disabled = fmt.Sprintf("only %d of the last %d reads matched the predicted order (epoch %d, position %d); the seed, sampler or layout is probably not the job's",
			r.matched, r.filled, p.cur.epoch, p.cur.pos)
		if p.curErr != nil {
			p.disabled += ": " + p.curErr.Error()
		}
		p.log.Warn("prefetch: prediction does not match the reads; prefetching stopped", "reason", p.disabled)
		p.gen++ // in-flight results no longer count
		p.dq, p.leadBytes = p.dq[:0], 0
	}
}
