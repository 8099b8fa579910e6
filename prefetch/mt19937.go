package prefetch

import (
	"encoding/binary"
	"fmt"
)

// DefaultTorchSeed is the seed of a fresh torch.Generator().
const DefaultTorchSeed uint64 = 67280421310721

const (
	mtN = 624
	mtM = 397

	// torchStateSize is len(torch.get_rng_state()) for the CPU generator.
	torchStateSize = 5056
)

// MT19937 is the 32-bit Mersenne Twister in the form PyTorch's CPU
// generator uses it: the standard MT19937 output sequence, with `left`
// and `next` bookkeeping so that a state exported by torch.get_rng_state()
// resumes at the same word.
type MT19937 struct {
	state [mtN]uint32
	left  int // words left before the next twist, plus one
	next  int // index of the next word in state
}

// NewTorchGenerator returns the generator of
// torch.Generator().manual_seed(seed): only the low 32 bits of seed seed
// the twister (seeds 5 and 2^32+5 give the same sequence). A negative
// Python seed wraps modulo 2^64 before it gets here.
func NewTorchGenerator(seed uint64) *MT19937 {
	g := &MT19937{}
	g.Seed(uint32(seed))
	return g
}

// Seed reinitialises g with the standard MT19937 seeding of s.
func (g *MT19937) Seed(s uint32) {
	g.state[0] = s
	for j := 1; j < mtN; j++ {
		prev := g.state[j-1]
		g.state[j] = 1812433253*(prev^(prev>>30)) + uint32(j)
	}
	g.left = 1
	g.next = 0
}

func (g *MT19937) twist() {
	const upper, lower, matrixA = 0x80000000, 0x7fffffff, 0x9908b0df
	s := &g.state
	for i := 0; i < mtN; i++ {
		y := s[i]&upper | s[(i+1)%mtN]&lower
		v := s[(i+mtM)%mtN] ^ y>>1
		if y&1 != 0 {
			v ^= matrixA
		}
		s[i] = v
	}
	g.left = mtN
	g.next = 0
}

// Uint32 returns the next 32-bit output (torch's random()).
func (g *MT19937) Uint32() uint32 {
	g.left--
	if g.left == 0 {
		g.twist()
	}
	y := g.state[g.next]
	g.next++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// Uint64 returns torch's random64(): the first word drawn is the high half.
func (g *MT19937) Uint64() uint64 {
	hi := g.Uint32()
	lo := g.Uint32()
	return uint64(hi)<<32 | uint64(lo)
}

// Skip draws and discards n words.
func (g *MT19937) Skip(n int) {
	for range n {
		g.Uint32()
	}
}

// Clone returns an independent copy of g.
func (g *MT19937) Clone() *MT19937 {
	c := *g
	return &c
}

// TorchStateFromBytes decodes the 5056-byte tensor returned by
// torch.get_rng_state() (the legacy THGeneratorState layout): `left` is an
// int32 at offset 8, the 624 state words are uint64s at offset 24+8i, and
// the next word index is 625-left.
func TorchStateFromBytes(b []byte) (*MT19937, error) {
	if len(b) != torchStateSize {
		return nil, fmt.Errorf("torch rng state: got %d bytes, want %d (torch.get_rng_state() of the CPU generator)", len(b), torchStateSize)
	}
	le := binary.LittleEndian
	left := int(int32(le.Uint32(b[8:])))
	if left < 1 || left > mtN {
		return nil, fmt.Errorf("torch rng state: left = %d out of range [1, %d]", left, mtN)
	}
	g := &MT19937{left: left, next: mtN + 1 - left}
	if left == 1 {
		g.next = 0 // the next draw twists first
	}
	for i := range mtN {
		g.state[i] = uint32(le.Uint64(b[24+8*i:]))
	}
	return g, nil
}
