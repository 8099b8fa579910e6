package main

import (
	"strings"
	"testing"

	"github.com/stallfs/stallfs/peers"
)

// TestGroupWhatIf: the group's backend bytes per epoch are max(0, D - sum
// of the members' budgets), unknown budgets count as this member's, and
// the live view leaves out members that are down.
func TestGroupWhatIf(t *testing.T) {
	st := peers.Stats{Self: "a:1", CacheBytes: 100, Peers: []peers.PeerStats{
		{Addr: "b:1", Up: true, CacheBytes: 300},
		{Addr: "c:1", Up: false, CacheBytes: -1},
	}}
	for _, tc := range []struct {
		d                      int64
		want, wantLive, cached int64
	}{
		{1000, 500, 600, 500},
		{450, 0, 50, 500},
		{0, 0, 0, 500},
	} {
		g := newGroupWhatIf(st, tc.d)
		if g.Members != 3 || g.LiveMembers != 2 || g.CacheBytes != tc.cached || g.LiveCacheBytes != 400 || g.AssumedBudgets != 1 ||
			g.BackendBytesPerEpoch != tc.want || g.LiveBackendBytesPerEpoch != tc.wantLive {
			t.Errorf("D=%d: %+v; want cache 500 (400 live), backend %d (%d live), 1 assumed", tc.d, g, tc.want, tc.wantLive)
		}
	}
	var b strings.Builder
	writePeerText(&b, &peerStats{Stats: st, Group: newGroupWhatIf(st, 1<<20)})
	out := b.String()
	for _, want := range []string{"2/3 members live", "c:1", "DOWN", "unknown", "group cache 500 B (1 budgets assumed", "-> backend 1024 KiB per epoch", "with the 2 live members"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}
