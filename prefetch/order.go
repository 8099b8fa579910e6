package prefetch

import (
	"errors"
	"fmt"
	"sync"
)

// Order maps an epoch to the sequence of dataset indices a loader reads in
// that epoch. Implementations are safe for concurrent use.
type Order interface {
	// Epoch returns the indices of epoch e (e >= 0), in read order. The
	// caller must not modify the returned slice.
	Epoch(e int) ([]int, error)
	// Len is the dataset size the order was built for; every index it
	// returns is in [0, Len()).
	Len() int
}

// ErrNoOrder is returned by List.Epoch for an epoch nobody pushed.
var ErrNoOrder = errors.New("no order pushed for this epoch")

// MaxEpoch is the largest epoch an Order answers for. Some orders derive
// epoch e by stepping a generator through every earlier epoch, so an
// unbounded e (from the control socket) would hang the caller.
const MaxEpoch = 1 << 16

func checkEpoch(e int) error {
	if e < 0 || e > MaxEpoch {
		return fmt.Errorf("epoch %d: must be in 0..%d", e, MaxEpoch)
	}
	return nil
}

// Sequential is the order 0, 1, ..., N-1 in every epoch (a DataLoader
// without shuffle, or SequentialSampler).
type Sequential struct {
	n   int
	seq []int
}

// NewSequential returns the sequential order over n items.
func NewSequential(n int) *Sequential {
	s := &Sequential{n: n, seq: make([]int, n)}
	for i := range s.seq {
		s.seq[i] = i
	}
	return s
}

// Epoch implements Order.
func (s *Sequential) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	return s.seq, nil
}

// Len implements Order.
func (s *Sequential) Len() int { return s.n }

// List is an order pushed explicitly per epoch at run time (by a job
// through the control socket, e.g. a DALI pipeline or a custom sampler).
// An epoch without a pushed order falls back to the most recent earlier
// pushed epoch when Repeat is set, and otherwise is ErrNoOrder.
type List struct {
	n int

	mu     sync.Mutex
	epochs map[int][]int // guarded by mu
	repeat bool          // guarded by mu
}

// NewList returns an empty List order over n items. With repeat, an epoch
// that was not pushed repeats the last pushed epoch before it.
func NewList(n int, repeat bool) *List {
	return &List{n: n, epochs: make(map[int][]int), repeat: repeat}
}

// Push sets the order of epoch e. Every index must be in [0, Len()).
func (l *List) Push(e int, idx []int) error {
	if err := checkEpoch(e); err != nil {
		return err
	}
	for i, x := range idx {
		if x < 0 || x >= l.n {
			return fmt.Errorf("push epoch %d: item %d: index %d out of range [0, %d)", e, i, x, l.n)
		}
	}
	c := append([]int(nil), idx...)
	l.mu.Lock()
	l.epochs[e] = c
	l.mu.Unlock()
	return nil
}

// Epoch implements Order.
func (l *List) Epoch(e int) ([]int, error) {
	if err := checkEpoch(e); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.epochs[e]; ok {
		return o, nil
	}
	if l.repeat {
		best := -1
		for k := range l.epochs {
			if k < e && k > best {
				best = k
			}
		}
		if best >= 0 {
			return l.epochs[best], nil
		}
	}
	return nil, fmt.Errorf("epoch %d: %w", e, ErrNoOrder)
}

// Len implements Order.
func (l *List) Len() int { return l.n }
