// Package throttle wraps a backend.Backend to emulate remote storage with a
// local one, count what reaches the backend, and inject faults. It is a
// benchmarking and testing aid (stallfs mount --backend-latency and
// --backend-bandwidth), not a production feature.
//
// Every ReadAt first waits Options.Latency (the time to first byte of a
// remote request), then reads from the wrapped backend, then waits until a
// token bucket shared by all requests of the wrapper has let its bytes
// through at Options.BytesPerSec. Concurrent readers therefore share the
// bandwidth, while their latencies overlap as they would against a remote
// store. Every wait gives up when the request's context is done.
//
// Faults are injected with Options.Fault: a hand-written hook, FailFirst,
// a spec (ParseFault: errors, hangs, counted, by operation and path) or a
// spec file re-read when it changes (FaultFile), which lets a test change
// the faults of a running mount. Options.Timeout bounds each request as a
// remote store's client would, so that a hang ends in an error.
//
// Counters counts calls and bytes independently of the code above the
// backend, so tests and benchmarks can check stallfs's own accounting.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stallfs/stallfs/backend"
)

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Walker  = (*Backend)(nil)
)

// Operation names passed to Options.Fault.
const (
	OpList = "list"
	OpStat = "stat"
	OpRead = "read"
	OpWalk = "walk"
)

// Options configures a wrapper. The zero value passes every call through
// unchanged (and counts it).
type Options struct {
	// Latency is added before the first byte of every ReadAt.
	Latency time.Duration
	// MetaLatency is added before every List, Stat and Walk.
	MetaLatency time.Duration
	// BytesPerSec limits the bytes read per second, shared by all
	// concurrent requests of the wrapper (0: unlimited).
	BytesPerSec int64
	// Burst is how many bytes the bucket lets through at once after an
	// idle period (0: 10 ms worth of BytesPerSec).
	Burst int64
	// Fault, if set, is called before each operation with its name (OpRead,
	// ...), its path and, for reads, the offset; a non-nil error fails the
	// operation with that error (wrapped in a *iofs.PathError) without
	// calling the wrapped backend; ErrHang instead makes the operation
	// wait until its context is done, as a request that a store never
	// answers. It must be safe for concurrent use.
	Fault func(op, path string, off int64) error
	// Timeout bounds each List, Stat and ReadAt, waits and the wrapped
	// backend's call included, as a remote store's request timeout does
	// (0: none; a Walk, many requests, is not bounded as a whole). An
	// operation that runs out fails with an error satisfying
	// errors.Is(err, context.DeadlineExceeded).
	Timeout time.Duration
	// ShortRead, if set, is called after each ReadAt of the wrapped backend
	// that returned n > 0 bytes and no error; the wrapper then returns only
	// the first m (<= n) bytes it returns, with a nil error, breaking
	// io.ReaderAt on purpose so tests can check that callers notice.
	ShortRead func(path string, off int64, n int) (m int)
}

// Counters are totals of the operations that reached the wrapper.
type Counters struct {
	// ReadCalls, ListCalls, StatCalls and WalkCalls count calls, failed
	// ones included.
	ReadCalls, ListCalls, StatCalls, WalkCalls int64
	// ReadBytes is the number of bytes ReadAt returned to callers.
	ReadBytes int64
	// Errors counts calls that failed (io.EOF from ReadAt is not a failure).
	Errors int64
}

// Backend is a throttling, counting, fault-injecting backend.Backend. It is
// safe for concurrent use.
type Backend struct {
	// immutable after New
	b      backend.Backend
	opts   Options
	bucket *bucket // nil when unlimited

	readCalls, listCalls, statCalls, walkCalls atomic.Int64
	readBytes, errs                            atomic.Int64
}

// New wraps b. Closing the wrapper closes b.
func New(b backend.Backend, opts Options) *Backend {
	t := &Backend{b: b, opts: opts}
	if opts.BytesPerSec > 0 {
		t.bucket = newBucket(opts.BytesPerSec, opts.Burst)
	}
	return t
}

// Counters returns the totals so far.
func (t *Backend) Counters() Counters {
	return Counters{
		ReadCalls: t.readCalls.Load(),
		ListCalls: t.listCalls.Load(),
		StatCalls: t.statCalls.Load(),
		WalkCalls: t.walkCalls.Load(),
		ReadBytes: t.readBytes.Load(),
		Errors:    t.errs.Load(),
	}
}

// String returns the wrapped backend's name, so cache namespaces do not
// change when a mount is throttled.
func (t *Backend) String() string { return t.b.String() }

// Close closes the wrapped backend.
func (t *Backend) Close() error { return t.b.Close() }

// List lists dir after MetaLatency.
func (t *Backend) List(ctx context.Context, dir string) ([]backend.Entry, error) {
	t.listCalls.Add(1)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	if err := t.before(ctx, OpList, dir, 0, t.opts.MetaLatency); err != nil {
		return nil, t.fail(err)
	}
	es, err := t.b.List(ctx, dir)
	if err != nil {
		return nil, t.fail(err)
	}
	return es, nil
}

// Stat stats path after MetaLatency.
func (t *Backend) Stat(ctx context.Context, path string) (backend.Entry, error) {
	t.statCalls.Add(1)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	if err := t.before(ctx, OpStat, path, 0, t.opts.MetaLatency); err != nil {
		return backend.Entry{}, t.fail(err)
	}
	e, err := t.b.Stat(ctx, path)
	if err != nil {
		return backend.Entry{}, t.fail(err)
	}
	return e, nil
}

// ReadAt reads after Latency and returns once the shared bandwidth has let
// the bytes through.
func (t *Backend) ReadAt(ctx context.Context, path, version string, p []byte, off int64) (int, error) {
	t.readCalls.Add(1)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	if err := t.before(ctx, OpRead, path, off, t.opts.Latency); err != nil {
		return 0, t.fail(err)
	}
	n, err := t.b.ReadAt(ctx, path, version, p, off)
	if n > 0 && err == nil && t.opts.ShortRead != nil {
		n = min(max(t.opts.ShortRead(path, off, n), 0), n)
	}
	if t.bucket != nil && n > 0 {
		if werr := sleepUntil(ctx, t.bucket.reserve(n)); werr != nil {
			return 0, t.fail(&iofs.PathError{Op: OpRead, Path: path, Err: werr})
		}
	}
	t.readBytes.Add(int64(n))
	if err != nil && err != io.EOF {
		t.errs.Add(1)
	}
	return n, err
}

// Walk walks dir after MetaLatency with the wrapped backend's Walker, or,
// when it has none, directory by directory through List (each List then
// counted and delayed as such).
func (t *Backend) Walk(ctx context.Context, dir string, fn func(path string, e backend.Entry) error) error {
	t.walkCalls.Add(1)
	if err := t.before(ctx, OpWalk, dir, 0, t.opts.MetaLatency); err != nil {
		return t.fail(err)
	}
	w, ok := t.b.(backend.Walker)
	if !ok {
		// Errors of the Lists are counted by List.
		return t.walkList(ctx, dir, fn)
	}
	err := w.Walk(ctx, dir, func(path string, e backend.Entry) error {
		if err := fn(path, e); err != nil {
			return errStop{err}
		}
		return nil
	})
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return t.fail(err)
	}
	return nil
}

// errStop marks an error returned by a Walk callback, which is passed up
// unchanged and not counted as a backend error.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }
func (e errStop) Unwrap() error { return e.err }

func (t *Backend) walkList(ctx context.Context, dir string, fn func(string, backend.Entry) error) error {
	es, err := t.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		p := e.Name
		if dir != "" {
			p = dir + "/" + e.Name
		}
		if err := fn(p, e); err != nil {
			return err
		}
		if e.IsDir() {
			if err := t.walkList(ctx, p, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// bound applies Options.Timeout to one operation.
func (t *Backend) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.opts.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, t.opts.Timeout)
}

// before runs the fault hook and waits d.
func (t *Backend) before(ctx context.Context, op, path string, off int64, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return &iofs.PathError{Op: op, Path: path, Err: err}
	}
	if t.opts.Fault != nil {
		err := t.opts.Fault(op, path, off)
		if errors.Is(err, ErrHang) {
			<-ctx.Done()
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
		if err != nil {
			return &iofs.PathError{Op: op, Path: path, Err: err}
		}
	}
	if d > 0 {
		if err := sleepUntil(ctx, time.Now().Add(d)); err != nil {
			return &iofs.PathError{Op: op, Path: path, Err: err}
		}
	}
	return nil
}

// fail counts err and returns it.
func (t *Backend) fail(err error) error {
	t.errs.Add(1)
	return err
}

// sleepUntil waits until deadline or until ctx is done.
func sleepUntil(ctx context.Context, deadline time.Time) error {
	d := time.Until(deadline)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FailFirst returns an Options.Fault that fails the first n calls of the
// given operations (all operations if none are named) with err, then lets
// every call through.
func FailFirst(n int, err error, ops ...string) func(op, path string, off int64) error {
	var mu sync.Mutex
	left := n
	return func(op, _ string, _ int64) error {
		if len(ops) > 0 && !contains(ops, op) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 {
			return nil
		}
		left--
		return err
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
