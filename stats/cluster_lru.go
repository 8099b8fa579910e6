package stats

import (
	"math"
	"math/rand/v2"
)

// simulateLRU replays in's epochs against a pure LRU cache of C bytes per
// node and returns the hit ratio of each epoch and the item count used.
// Items are of equal size (the mean); a dataset of more than
// in.LRUSample items is scaled down to that many, with the cache holding
// the same share of them (TestLRUSampleScaling bounds the error). Each
// epoch is a fresh permutation; with Distributed, position p of it goes to
// node p mod M, every node with its own LRU, and the ratio is over all
// nodes' reads.
func simulateLRU(in ClusterInput) ([]float64, int) {
	item := math.Min(float64(in.DatasetBytes)/float64(in.Files), float64(in.ChunkBytes))
	items := max(int(math.Round(float64(in.DatasetBytes)/item)), 1)
	n := min(items, in.LRUSample)
	nodes := 1
	if in.Distributed {
		nodes = in.Nodes
		n = max(n, min(items, nodes)) // every node reads at least one item
	}
	capItems := int(math.Min(float64(in.CacheBytes)/float64(in.DatasetBytes), 1) * float64(n))
	caches := make([]*lru, nodes)
	for i := range caches {
		caches[i] = newLRU(capItems, n, nodes == 1)
	}
	rng := rand.New(rand.NewPCG(in.Seed, 0x5eed))
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	ratios := make([]float64, 0, in.Epochs)
	for range in.Epochs {
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		hits := 0
		for p, x := range perm {
			if caches[p%nodes].access(x) {
				hits++
			}
		}
		ratios = append(ratios, float64(hits)/float64(n))
	}
	return ratios, n
}

// lru is an LRU set of at most capacity items (ints below n): a doubly
// linked list over slots, most recent at head, with an index from item to
// slot (dense for one node, a map when many nodes each see a few items).
type lru struct {
	capacity         int
	dense            []int32 // item -> slot+1 (0: absent), or nil
	sparse           map[int32]int32
	item, prev, next []int32
	head, tail       int32
}

func newLRU(capacity, n int, dense bool) *lru {
	c := &lru{capacity: capacity, head: -1, tail: -1}
	if dense {
		c.dense = make([]int32, n)
	} else {
		c.sparse = map[int32]int32{}
	}
	return c
}

func (c *lru) lookup(x int32) (int32, bool) {
	if c.dense != nil {
		s := c.dense[x] - 1
		return s, s >= 0
	}
	s, ok := c.sparse[x]
	return s, ok
}

func (c *lru) set(x, slot int32) {
	if c.dense != nil {
		c.dense[x] = slot + 1
	} else if slot < 0 {
		delete(c.sparse, x)
	} else {
		c.sparse[x] = slot
	}
}

func (c *lru) unlink(s int32) {
	if p := c.prev[s]; p >= 0 {
		c.next[p] = c.next[s]
	} else {
		c.head = c.next[s]
	}
	if nx := c.next[s]; nx >= 0 {
		c.prev[nx] = c.prev[s]
	} else {
		c.tail = c.prev[s]
	}
}

func (c *lru) pushFront(s int32) {
	c.prev[s], c.next[s] = -1, c.head
	if c.head >= 0 {
		c.prev[c.head] = s
	}
	c.head = s
	if c.tail < 0 {
		c.tail = s
	}
}

// access reads x: true on a hit; a miss inserts x, evicting the least
// recently used item when full.
func (c *lru) access(x int32) bool {
	if s, ok := c.lookup(x); ok {
		c.unlink(s)
		c.pushFront(s)
		return true
	}
	if c.capacity == 0 {
		return false
	}
	var s int32
	if len(c.item) < c.capacity {
		s = int32(len(c.item))
		c.item, c.prev, c.next = append(c.item, x), append(c.prev, -1), append(c.next, -1)
	} else {
		s = c.tail
		c.unlink(s)
		c.set(c.item[s], -1)
		c.item[s] = x
	}
	c.set(x, s)
	c.pushFront(s)
	return false
}
