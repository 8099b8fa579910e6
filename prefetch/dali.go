package prefetch

import (
	"fmt"
	"sync"
)

// daliSeed is DALI's kDaliDataloaderSeed.
const daliSeed = 524287

// stdUniform is libstdc++'s std::uniform_int_distribution<uint64>{a, b}
// drawing from a std::mt19937 (a 32-bit generator): Lemire's multiply-
// and-reject downscaling for ranges below 2^32, the raw word for exactly
// 2^32 values, recursive upscaling above.
func stdUniform(g *MT19937, a, b uint64) uint64 {
	const urngRange = 0xffffffff
	urange := b - a
	var ret uint64
	switch {
	case urange < urngRange:
		ret = uint64(lemire32(g, uint32(urange+1)))
	case urange > urngRange:
		for {
			const uerngRange = urngRange + 1
			tmp := uerngRange * stdUniform(g, 0, urange/uerngRange)
			ret = tmp + uint64(g.Uint32())
			if ret <= urange && ret >= tmp {
				break
			}
		}
	default:
		ret = uint64(g.Uint32())
	}
	return ret + a
}

// lemire32 returns a value in [0, r) from 32-bit words with the nearly
// divisionless method, rejecting exactly as libstdc++'s _S_nd does.
func lemire32(g *MT19937, r uint32) uint32 {
	product := uint64(g.Uint32()) * uint64(r)
	low := uint32(product)
	if low < r {
		threshold := -r % r
		for low < threshold {
			product = uint64(g.Uint32()) * uint64(r)
			low = uint32(product)
		}
	}
	return uint32(product >> 32)
}

// stdShuffle is libstdc++'s std::shuffle(x.begin(), x.end(), g) for a
// std::mt19937 g, including its optimisation that draws two swap positions
// from one distribution call when n*n fits the generator's range.
func stdShuffle(x []int, g *MT19937) {
	n := uint64(len(x))
	if n == 0 {
		return
	}
	const urngRange = 0xffffffff
	if urngRange/n >= n {
		i := 1
		if n%2 == 0 {
			j := stdUniform(g, 0, 1)
			x[i], x[j] = x[j], x[i]
			i++
		}
		for i != len(x) {
			b0 := uint64(i) + 1
			b1 := b0 + 1
			v := stdUniform(g, 0, b0*b1-1)
			p, q := v/b1, v%b1
			x[i], x[p] = x[p], x[i]
			i++
			x[i], x[q] = x[q], x[i]
			i++
		}
		return
	}
	for i := 1; i < len(x); i++ {
		j := stdUniform(g, 0, uint64(i))
		x[i], x[j] = x[j], x[i]
	}
}

// DALIOptions are the fn.readers.file arguments that decide the read
// order.
type DALIOptions struct {
	// ShardID and NumShards are shard_id and num_shards (0: 1).
	ShardID, NumShards int
	// RandomShuffle is random_shuffle=True: the list is shuffled once with
	// a fixed seed (the same on every shard) and then read sequentially;
	// only the output order is randomised, by a buffer, after the read.
	RandomShuffle bool
	// ShuffleAfterEpoch is shuffle_after_epoch=True (implies StickToShard).
	ShuffleAfterEpoch bool
	// StickToShard is stick_to_shard=True. Without it a reader moves on
	// to the next shard every epoch.
	StickToShard bool
	// Checkpointing is the pipeline's enable_checkpointing=True: each
	// epoch's reshuffle then starts from the initial order instead of
	// the previous epoch's.
	Checkpointing bool
}

// DALIFile is the read order of DALI's fn.readers.file (FileLabelLoader)
// over a file list of n entries: the list (optionally shuffled once with
// std::mt19937(524287)), reshuffled before epoch e with
// std::mt19937(524288+e) under shuffle_after_epoch, then the contiguous
// block [n*v/num, n*(v+1)/num) of shard v (v = shard_id with
// stick_to_shard, (shard_id + e) mod num_shards without).
type DALIFile struct {
	// immutable after New
	n    int
	opts DALIOptions
	base []int

	memo epochMemo

	mu       sync.Mutex
	cur      []int // guarded by mu: the list after epoch curEpoch's reshuffle
	curEpoch int   // guarded by mu
}

// NewDALIFile returns the DALI file reader order over n list entries.
func NewDALIFile(n int, o DALIOptions) (*DALIFile, error) {
	o.NumShards = max(o.NumShards, 1)
	if n < 1 {
		return nil, fmt.Errorf("dali-file: dataset size %d: must be >= 1", n)
	}
	if o.ShardID < 0 || o.ShardID >= o.NumShards {
		return nil, fmt.Errorf("dali-file: shard_id %d out of range [0, %d)", o.ShardID, o.NumShards)
	}
	if o.ShuffleAfterEpoch && o.RandomShuffle {
		return nil, fmt.Errorf("dali-file: shuffle_after_epoch and random_shuffle cannot both be set")
	}
	if o.ShuffleAfterEpoch {
		o.StickToShard = true
	}
	d := &DALIFile{n: n, opts: o, base: make([]int, n), curEpoch: -1}
	for i := range d.base {
		d.base[i] = i
	}
	if o.RandomShuffle {
		stdShuffle(d.base, newStdMT(daliSeed))
	}
	return d, nil
}

func newStdMT(seed uint32) *MT19937 {
	g := &MT19937{}
	g.Seed(seed)
	return g
}

// list returns the whole list as it stands during epoch e.
func (d *DALIFile) list(e int) []int {
	if !d.opts.ShuffleAfterEpoch {
		return d.base
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opts.Checkpointing {
		l := append([]int(nil), d.base...)
		stdShuffle(l, newStdMT(uint32(daliSeed+1+e)))
		return l
	}
	if d.cur == nil || d.curEpoch > e {
		d.cur, d.curEpoch = append([]int(nil), d.base...), -1
	}
	for d.curEpoch < e {
		d.curEpoch++
		stdShuffle(d.cur, newStdMT(uint32(daliSeed+1+d.curEpoch)))
	}
	return append([]int(nil), d.cur...)
}

// Epoch implements Order.
func (d *DALIFile) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	return d.memo.get(e, func() ([]int, error) {
		l := d.list(e)
		v := d.opts.ShardID
		if !d.opts.StickToShard {
			v = (v + e) % d.opts.NumShards
		}
		lo := int(int64(d.n) * int64(v) / int64(d.opts.NumShards))
		hi := int(int64(d.n) * int64(v+1) / int64(d.opts.NumShards))
		return append([]int(nil), l[lo:hi]...), nil
	})
}

// Len implements Order.
func (d *DALIFile) Len() int { return d.n }
