package peers

import (
	"fmt"
	"strconv"
	"testing"
)

func memberNames(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("10.0.%d.%d:7070", i/250, i%250+1)
	}
	return ms
}

func keyHashes(n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = hashString(key("train/n"+strconv.Itoa(i%1000)+"/"+strconv.Itoa(i)+".JPEG", "v1", int64(i%3)))
	}
	return hs
}

func memberHashes(ms []string) []uint64 {
	hs := make([]uint64, len(ms))
	for i, m := range ms {
		hs[i] = hashString(m)
	}
	return hs
}

// TestOwnerBalanced checks that 1M keys spread over 2..64 members with the
// largest share within a few percent of the smallest.
func TestOwnerBalanced(t *testing.T) {
	keys := keyHashes(1_000_000)
	for _, n := range []int{2, 3, 8, 64} {
		mh := memberHashes(memberNames(n))
		counts := make([]int, n)
		for _, hk := range keys {
			counts[owner(hk, mh, nil)]++
		}
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		ratio := float64(hi) / float64(lo)
		t.Logf("%2d members: max/min share %.4f", n, ratio)
		if ratio > 1.06 {
			t.Errorf("%d members: max/min share = %.4f (%d/%d), want <= 1.06", n, ratio, hi, lo)
		}
	}
}

// TestOwnerMinimalMovement checks that a member leaving moves only its own
// keys, and that it gets exactly those back when it returns.
func TestOwnerMinimalMovement(t *testing.T) {
	keys := keyHashes(100_000)
	for _, n := range []int{2, 8, 64} {
		mh := memberHashes(memberNames(n))
		gone := n / 2
		liveWithout := func(i int) bool { return i != gone }
		moved, owned := 0, 0
		movedTo := make([]int, n)
		for _, hk := range keys {
			before := owner(hk, mh, nil)
			after := owner(hk, mh, liveWithout)
			if before == gone {
				owned++
				movedTo[after]++
				if after == gone {
					t.Fatalf("%d members: a key stayed with the member that left", n)
				}
				continue
			}
			if after != before {
				moved++
			}
		}
		if moved != 0 {
			t.Errorf("%d members: %d keys of staying members moved when member %d left", n, moved, gone)
		}
		if owned == 0 {
			t.Errorf("%d members: member %d owned no key", n, gone)
		}
		// The leaver's keys spread over all others, not onto one.
		if n > 2 {
			for i, c := range movedTo {
				if i != gone && c == 0 {
					t.Errorf("%d members: none of the leaver's %d keys went to member %d", n, owned, i)
				}
			}
		}
	}
}

// TestOwnerStable pins a few owners so that a change of the hash (which
// would split a group running mixed versions) fails here.
func TestOwnerStable(t *testing.T) {
	ms := []string{"127.0.0.1:7070", "127.0.0.1:7071", "127.0.0.1:7072"}
	got := map[string]string{}
	for _, k := range []string{key("a.jpg", "1", 0), key("b.jpg", "1", 0), key("c.jpg", "1", 7), key("train/n01/x.JPEG", "123-456", 0)} {
		got[k] = Owner(k, ms)
	}
	// The list order does not matter.
	rev := []string{ms[2], ms[0], ms[1]}
	for k, o := range got {
		if o2 := Owner(k, rev); o2 != o {
			t.Errorf("Owner(%q) = %s with one order, %s with another", k, o, o2)
		}
	}
	want := map[string]string{
		key("a.jpg", "1", 0):                  golden[0],
		key("b.jpg", "1", 0):                  golden[1],
		key("c.jpg", "1", 7):                  golden[2],
		key("train/n01/x.JPEG", "123-456", 0): golden[3],
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Owner(%q) = %s, want %s", k, got[k], w)
		}
	}
	if Owner("x", nil) != "" {
		t.Errorf("Owner with no members is not empty")
	}
}

var golden = [4]string{"127.0.0.1:7071", "127.0.0.1:7070", "127.0.0.1:7072", "127.0.0.1:7071"}
