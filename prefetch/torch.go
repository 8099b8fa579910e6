package prefetch

import (
	"fmt"
	"sync"
)

// SamplerOptions are the RandomSampler arguments that change its draws.
// The zero value is RandomSampler(dataset) under the current PyTorch.
type SamplerOptions struct {
	// NumSamples is num_samples (0: the dataset size).
	NumSamples int
	// Replacement is replacement=True.
	Replacement bool
	// Version selects the randperm/randint variant.
	Version TorchVersion
}

func (o SamplerOptions) numSamples(n int) int {
	if o.NumSamples > 0 {
		return o.NumSamples
	}
	return n
}

// wordsPerPass is how many 32-bit words one full RandomSampler pass draws
// from its generator.
func (o SamplerOptions) wordsPerPass(n int) int {
	ns := o.numSamples(n)
	if o.Replacement {
		if n >= 1<<28 && (o.Version == TorchCurrent || n >= 1<<32) {
			return 2 * ns
		}
		return ns
	}
	perPerm := max(n-1, 0)
	if o.Version == TorchCurrent && n >= randpermSwitch {
		perPerm = 2 * n
	}
	return (ns/n + 1) * perPerm
}

// samplerPass returns the indices of one RandomSampler pass driven by g,
// advancing g exactly as PyTorch does when the iterator runs to the end:
// num_samples // n full permutations, then one more permutation of which
// only the first num_samples % n are used (it is always drawn).
func samplerPass(g *MT19937, n int, o SamplerOptions) []int {
	ns := o.numSamples(n)
	if o.Replacement {
		out := make([]int, ns)
		for i := range out {
			out[i] = randint(n, g, o.Version)
		}
		return out
	}
	out := make([]int, 0, ns)
	perm := make([]int, n)
	for range ns / n {
		RandpermInto(perm, g, o.Version)
		out = append(out, perm...)
	}
	k := ns % n
	if o.Version == TorchCurrent && n >= randpermSwitch {
		RandpermInto(perm, g, o.Version)
		return append(out, perm[:k]...)
	}
	// The swap shuffle fixes position i at step i: the first k positions
	// need k steps; the rest of the draws only advance the generator.
	for i := range perm {
		perm[i] = i
	}
	for i := 0; i < min(k, n-1); i++ {
		z := int(int64(g.Uint32()) % int64(n-i))
		perm[i], perm[i+z] = perm[i+z], perm[i]
	}
	g.Skip(max(n-1-k, 0))
	return append(out, perm[:k]...)
}

// epochMemo keeps the two most recently computed epochs (the prefetcher
// asks for the current and the next one over and over).
type epochMemo struct {
	mu    sync.Mutex
	epoch [2]int
	idx   [2][]int
	next  int
}

func (m *epochMemo) get(e int, compute func() ([]int, error)) ([]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.idx {
		if m.idx[i] != nil && m.epoch[i] == e {
			return m.idx[i], nil
		}
	}
	v, err := compute()
	if err != nil {
		return nil, err
	}
	m.epoch[m.next], m.idx[m.next] = e, v
	m.next = 1 - m.next
	return v, nil
}

// TorchRandom is RandomSampler(dataset,
// generator=torch.Generator().manual_seed(seed)), where every epoch runs
// the iterator to its end, so epoch e continues the generator left by
// epochs 0..e-1.
type TorchRandom struct {
	// immutable after New
	n    int
	opts SamplerOptions

	memo epochMemo

	mu     sync.Mutex
	starts []*MT19937 // guarded by mu; starts[e] = generator at the start of epoch e
}

// NewTorchRandom returns the RandomSampler order over n items (n >= 1).
func NewTorchRandom(n int, seed uint64, opts SamplerOptions) (*TorchRandom, error) {
	return NewTorchRandomFrom(n, NewTorchGenerator(seed), opts)
}

// NewTorchRandomFrom is NewTorchRandom with an explicit generator state at
// the start of epoch 0 (g is copied).
func NewTorchRandomFrom(n int, g *MT19937, opts SamplerOptions) (*TorchRandom, error) {
	if n < 1 {
		return nil, fmt.Errorf("torch-random: dataset size %d: must be >= 1", n)
	}
	if opts.NumSamples < 0 {
		return nil, fmt.Errorf("torch-random: num_samples %d: must be >= 0", opts.NumSamples)
	}
	return &TorchRandom{n: n, opts: opts, starts: []*MT19937{g.Clone()}}, nil
}

// Epoch implements Order.
func (t *TorchRandom) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	return t.memo.get(e, func() ([]int, error) {
		return samplerPass(t.start(e), t.n, t.opts), nil
	})
}

// start returns a copy of the generator at the start of epoch e.
func (t *TorchRandom) start(e int) *MT19937 {
	t.mu.Lock()
	defer t.mu.Unlock()
	words := t.opts.wordsPerPass(t.n)
	for len(t.starts) <= e {
		g := t.starts[len(t.starts)-1].Clone()
		g.Skip(words)
		t.starts = append(t.starts, g)
	}
	return t.starts[e].Clone()
}

// Len implements Order.
func (t *TorchRandom) Len() int { return t.n }

// TorchDistributed is torch.utils.data.DistributedSampler with set_epoch(e)
// called before epoch e.
type TorchDistributed struct {
	// immutable after New
	n, world, rank    int
	seed              uint64
	dropLast, shuffle bool
	version           TorchVersion
	perRank           int

	memo epochMemo
}

// DistributedOptions are DistributedSampler's arguments.
type DistributedOptions struct {
	// Seed is seed (default 0); a negative Python seed is passed as its
	// two's complement.
	Seed uint64
	// WorldSize is num_replicas (0: 1); Rank is rank.
	WorldSize, Rank int
	// DropLast is drop_last.
	DropLast bool
	// NoShuffle is shuffle=False.
	NoShuffle bool
	// Version selects the randperm variant.
	Version TorchVersion
}

// NewTorchDistributed returns the DistributedSampler order over n items.
func NewTorchDistributed(n int, o DistributedOptions) (*TorchDistributed, error) {
	w := max(o.WorldSize, 1)
	if n < 1 {
		return nil, fmt.Errorf("torch-distributed: dataset size %d: must be >= 1", n)
	}
	if o.Rank < 0 || o.Rank >= w {
		return nil, fmt.Errorf("torch-distributed: rank %d out of range [0, %d)", o.Rank, w)
	}
	per := (n + w - 1) / w
	if o.DropLast && n%w != 0 {
		per = n / w
	}
	return &TorchDistributed{
		n: n, world: w, rank: o.Rank, seed: o.Seed,
		dropLast: o.DropLast, shuffle: !o.NoShuffle, version: o.Version, perRank: per,
	}, nil
}

// Epoch implements Order.
func (t *TorchDistributed) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	return t.memo.get(e, func() ([]int, error) {
		var perm []int
		if t.shuffle {
			perm = Randperm(t.n, NewTorchGenerator(t.seed+uint64(e)), t.version)
		}
		out := make([]int, t.perRank)
		for j := range out {
			i := (t.rank + j*t.world) % t.n
			if perm != nil {
				i = perm[i]
			}
			out[j] = i
		}
		return out, nil
	})
}

// Len implements Order.
func (t *TorchDistributed) Len() int { return t.n }

// TorchGlobal is RandomSampler without a generator inside a DataLoader:
// each epoch seeds a fresh generator with a value drawn from the global
// generator. Starting from the global state s taken right before the
// first iter(loader) (or right after torch.manual_seed), with s's output
// words w0, w1, ...: a non-persistent DataLoader (and num_workers=0)
// draws the epoch-e seed from w[4e+2], w[4e+3] (w[4e], w[4e+1] are the
// loader's base seed); persistent workers draw the base seed once, so
// epoch e uses w[2e+2], w[2e+3].
type TorchGlobal struct {
	// immutable after New
	n          int
	start      *MT19937
	persistent bool
	opts       SamplerOptions

	memo epochMemo
}

// NewTorchGlobal returns the order of a shuffling DataLoader without a
// generator whose global generator was in state start (copied) before
// its first epoch.
func NewTorchGlobal(n int, start *MT19937, persistent bool, opts SamplerOptions) (*TorchGlobal, error) {
	if n < 1 {
		return nil, fmt.Errorf("torch-global: dataset size %d: must be >= 1", n)
	}
	return &TorchGlobal{n: n, start: start.Clone(), persistent: persistent, opts: opts}, nil
}

// Epoch implements Order.
func (t *TorchGlobal) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	return t.memo.get(e, func() ([]int, error) {
		stride := 4
		if t.persistent {
			stride = 2
		}
		g := t.start.Clone()
		g.Skip(stride*e + 2)
		return samplerPass(NewTorchGenerator(randomInt63(g)), t.n, t.opts), nil
	})
}

// Len implements Order.
func (t *TorchGlobal) Len() int { return t.n }
