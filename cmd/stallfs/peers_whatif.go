package main

import (
	"fmt"
	"io"

	"github.com/dustin/go-humanize"

	"github.com/stallfs/stallfs/peers"
)

// groupWhatIf is the group-level what-if of the peers section: with the
// members' caches together, the backend bytes of every epoch after the
// first are max(0, D - sum of the caches). A member whose budget is not
// known yet (it has not answered a health probe) counts with this
// member's budget.
type groupWhatIf struct {
	DatasetBytes int64 `json:"dataset_bytes"`
	// Members and CacheBytes: the whole group as configured.
	Members              int   `json:"members"`
	CacheBytes           int64 `json:"cache_bytes"`
	BackendBytesPerEpoch int64 `json:"backend_bytes_per_epoch"`
	// Live*: the members live in this member's view now (the items of a
	// member that is down are owned by the others meanwhile).
	LiveMembers              int   `json:"live_members"`
	LiveCacheBytes           int64 `json:"live_cache_bytes"`
	LiveBackendBytesPerEpoch int64 `json:"live_backend_bytes_per_epoch"`
	// AssumedBudgets counts the members whose budget is assumed equal to
	// this member's.
	AssumedBudgets int `json:"assumed_budgets"`
}

// newGroupWhatIf predicts the group's backend bytes per epoch for a
// dataset of d bytes from the group's view st.
func newGroupWhatIf(st peers.Stats, d int64) groupWhatIf {
	own := max(st.CacheBytes, 0)
	w := groupWhatIf{DatasetBytes: d, Members: 1, CacheBytes: own, LiveMembers: 1, LiveCacheBytes: own}
	for _, p := range st.Peers {
		b := p.CacheBytes
		if b < 0 {
			b = own
			w.AssumedBudgets++
		}
		w.Members++
		w.CacheBytes += b
		if p.Up {
			w.LiveMembers++
			w.LiveCacheBytes += b
		}
	}
	w.BackendBytesPerEpoch = max(0, d-w.CacheBytes)
	w.LiveBackendBytesPerEpoch = max(0, d-w.LiveCacheBytes)
	return w
}

// writePeerText prints the peers section of `stallfs stats`.
func writePeerText(w io.Writer, ps *peerStats) {
	size := func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
	g := ps.Group
	fmt.Fprintf(w, "\npeers: self %s, %d/%d members live\n", ps.Self, g.LiveMembers, g.Members)
	for _, p := range ps.Peers {
		state, budget := "up", "unknown"
		if !p.Up {
			state = "DOWN"
		}
		if p.CacheBytes >= 0 {
			budget = size(p.CacheBytes)
		}
		fmt.Fprintf(w, "  %-21s %-4s cache %-9s got %s in %d requests, %d failed, %d bad checksums\n",
			p.Addr, state, budget, size(p.Bytes), p.Requests, p.Failures, p.BadChecksums)
	}
	fmt.Fprintf(w, "  fills: %s from peers, %s from the backend, %d peer fallbacks\n",
		size(ps.Fills.PeerBytes), size(ps.Fills.BackendBytes), ps.Fills.PeerFallbacks)
	s := ps.Served
	fmt.Fprintf(w, "  served to others: %s in %d requests; refused: %d unauthorized, %d rejected, %d misdirected, %d failed\n",
		size(s.Bytes), s.Requests, s.Unauthorized, s.Rejected, s.Misdirected, s.Failed)
	assumed := ""
	if g.AssumedBudgets > 0 {
		assumed = fmt.Sprintf(" (%d budgets assumed equal to this member's)", g.AssumedBudgets)
	}
	fmt.Fprintf(w, "  group what-if: dataset %s, group cache %s%s -> backend %s per epoch after the first",
		size(g.DatasetBytes), size(g.CacheBytes), assumed, size(g.BackendBytesPerEpoch))
	if g.LiveMembers < g.Members {
		fmt.Fprintf(w, "; with the %d live members (cache %s): %s", g.LiveMembers, size(g.LiveCacheBytes), size(g.LiveBackendBytesPerEpoch))
	}
	fmt.Fprintln(w)
}
