package prefetch

import (
	"fmt"
	"strconv"
	"strings"
)

// TorchVersion selects which PyTorch algorithms an order reproduces where
// versions differ. The zero value is TorchCurrent.
type TorchVersion int

const (
	// TorchCurrent is PyTorch >= 2.7: randperm of n >= 214,748,364 uses
	// random64 (an inside-out shuffle); randint uses random64 for ranges
	// >= 2^28.
	TorchCurrent TorchVersion = iota
	// TorchLegacy is PyTorch <= 2.6 (including Debian bookworm's 1.13):
	// randperm always uses the 32-bit swap shuffle; randint uses random64
	// only for ranges >= 2^32.
	TorchLegacy
)

// randpermSwitch is the n from which PyTorch >= 2.7 uses the 64-bit
// randperm (UINT32_MAX / 20).
const randpermSwitch = 214748364

// ParseTorchVersion maps a version string such as "1.13", "2.6.0" or
// "2.7" (or "current"/"legacy", or "") to a TorchVersion.
func ParseTorchVersion(s string) (TorchVersion, error) {
	switch s = strings.TrimSpace(strings.ToLower(s)); s {
	case "", "current", "latest":
		return TorchCurrent, nil
	case "legacy":
		return TorchLegacy, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, fmt.Errorf("torch version %q: want MAJOR.MINOR", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("torch version %q: want MAJOR.MINOR", s)
	}
	if major < 2 || major == 2 && minor <= 6 {
		return TorchLegacy, nil
	}
	return TorchCurrent, nil
}

// String returns a human-readable name of v.
func (v TorchVersion) String() string {
	if v == TorchLegacy {
		return "legacy(<=2.6)"
	}
	return "current(>=2.7)"
}

// Randperm returns torch.randperm(n, generator=g) on the CPU, drawing
// from g exactly as the given PyTorch version does. It keeps PyTorch's
// modulo bias on purpose.
func Randperm(n int, g *MT19937, v TorchVersion) []int {
	r := make([]int, n)
	RandpermInto(r, g, v)
	return r
}

// RandpermInto is Randperm writing into r (n = len(r)).
func RandpermInto(r []int, g *MT19937, v TorchVersion) {
	n := len(r)
	if v == TorchCurrent && n >= randpermSwitch {
		for i := range n {
			z := int(g.Uint64() % uint64(i+1))
			r[i] = r[z]
			r[z] = i
		}
		return
	}
	for i := range r {
		r[i] = i
	}
	for i := 0; i < n-1; i++ {
		z := int(int64(g.Uint32()) % int64(n-i))
		r[i], r[i+z] = r[i+z], r[i]
	}
}

// randint returns torch.randint(high=n) for one element drawn from g.
func randint(n int, g *MT19937, v TorchVersion) int {
	limit := uint64(1) << 32
	if v == TorchCurrent {
		limit = 1 << 28
	}
	if uint64(n) >= limit {
		return int(g.Uint64() % uint64(n))
	}
	return int(uint64(g.Uint32()) % uint64(n))
}

// randomInt63 is torch.empty((), dtype=torch.int64).random_(): random64
// modulo 2^63.
func randomInt63(g *MT19937) uint64 {
	return g.Uint64() % (1 << 63)
}
