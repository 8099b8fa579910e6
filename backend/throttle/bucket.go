package throttle

import (
	"context"
	"sync"
	"time"
)

// bucket is a token bucket kept as a virtual clock: next is when the
// bandwidth is free again. A request of n bytes is served after everything
// reserved before it, so concurrent readers share the rate exactly and in
// arrival order; idle time accrues credit of at most burst.
type bucket struct {
	// immutable after newBucket
	rate  float64       // bytes per second
	burst time.Duration // credit an idle bucket keeps

	mu   sync.Mutex
	next time.Time // guarded by mu
}

func newBucket(bytesPerSec, burst int64) *bucket {
	b := &bucket{rate: float64(bytesPerSec)}
	if burst <= 0 {
		b.burst = 10 * time.Millisecond
	} else {
		b.burst = b.dur(burst)
	}
	return b
}

// dur is how long n bytes take at the bucket's rate.
func (b *bucket) dur(n int64) time.Duration {
	return time.Duration(float64(n) / b.rate * float64(time.Second))
}

// reserve takes n bytes from the bucket and returns when they have passed.
func (b *bucket) reserve(n int) time.Time {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	start := b.next
	if floor := now.Add(-b.burst); start.Before(floor) {
		start = floor
	}
	b.next = start.Add(b.dur(int64(n)))
	return b.next
}

// Limiter paces bytes at one rate shared by all its callers, with the
// wrapper's own token bucket, for programs that pace something other than
// a Backend (scripts/latency-proxy paces HTTP bodies with it).
type Limiter struct{ b *bucket }

// NewLimiter returns a Limiter of bytesPerSec (> 0) that lets burst bytes
// through at once after an idle spell (<= 0: 10 ms worth).
func NewLimiter(bytesPerSec, burst int64) *Limiter {
	return &Limiter{b: newBucket(bytesPerSec, burst)}
}

// Wait blocks until n more bytes may pass, or ctx ends. A nil Limiter
// never waits.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if l == nil || n <= 0 {
		return nil
	}
	return sleepUntil(ctx, l.b.reserve(n))
}
