package throttle

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of the fault specs (ParseFault).
var (
	// ErrHang, returned by an Options.Fault, makes the operation wait
	// until its context is done: a request the store never answers.
	ErrHang = errors.New("backend does not answer (injected fault)")
	// ErrInjected is the error of the "error" fault mode.
	ErrInjected = errors.New("backend error (injected fault)")
)

// ParseFault parses a fault spec into an Options.Fault. A spec is a mode
// and optional key=value settings separated by spaces:
//
//	pass                      every operation passes (also: an empty spec)
//	error [count=N] ...       operations fail with ErrInjected
//	hang [count=N] ...        operations wait until their context is done
//
// count=N applies the fault to the first N matching operations only;
// ops=read,stat,list,walk names the operations it applies to (default:
// read); path=PREFIX limits it to paths with that prefix.
func ParseFault(spec string) (func(op, path string, off int64) error, error) {
	f, err := parseFault(spec)
	if err != nil {
		return nil, err
	}
	return f.apply, nil
}

// fault is one parsed spec with its remaining count.
type fault struct {
	// immutable after parseFault
	err    error // nil: pass
	ops    []string
	prefix string
	count  bool // only the first n matching operations

	mu sync.Mutex
	n  int // guarded by mu
}

func parseFault(spec string) (*fault, error) {
	fields := strings.Fields(spec)
	f := &fault{ops: []string{OpRead}}
	if len(fields) == 0 {
		return f, nil
	}
	switch fields[0] {
	case "pass":
	case "error":
		f.err = ErrInjected
	case "hang":
		f.err = ErrHang
	default:
		return nil, fmt.Errorf("fault spec %q: mode %q: want pass, error or hang", spec, fields[0])
	}
	for _, kv := range fields[1:] {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("fault spec %q: %q: want key=value", spec, kv)
		case k == "count":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("fault spec %q: count %q: want an integer >= 0", spec, v)
			}
			f.n, f.count = n, true
		case k == "ops":
			f.ops = strings.Split(v, ",")
			for _, op := range f.ops {
				if !slices.Contains([]string{OpRead, OpStat, OpList, OpWalk}, op) {
					return nil, fmt.Errorf("fault spec %q: operation %q: want read, stat, list or walk", spec, op)
				}
			}
		case k == "path":
			f.prefix = v
		default:
			return nil, fmt.Errorf("fault spec %q: unknown key %q (want count, ops or path)", spec, k)
		}
	}
	return f, nil
}

func (f *fault) apply(op, path string, _ int64) error {
	if f.err == nil || !slices.Contains(f.ops, op) || !strings.HasPrefix(path, f.prefix) {
		return nil
	}
	if f.count {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n <= 0 {
			return nil
		}
		f.n--
	}
	return f.err
}

// FaultFile returns an Options.Fault whose spec (see ParseFault) is read
// from the file name, again whenever the file changes (its inode, size or
// modification time), so that a test can change the faults of a running
// mount; a count starts over at each change. A missing or empty file
// passes everything; a bad spec fails the operations with an error that
// names it.
func FaultFile(name string) func(op, path string, off int64) error {
	ff := &faultFile{name: name}
	return ff.apply
}

type faultFile struct {
	name string // immutable

	mu     sync.Mutex
	stamp  fileStamp // guarded by mu
	loaded bool      // guarded by mu
	cur    *fault    // guarded by mu; nil: the error is in err
	err    error     // guarded by mu
}

// fileStamp tells one version of a file from the next.
type fileStamp struct {
	ino, size int64
	mtime     time.Time
	exists    bool
}

func (ff *faultFile) apply(op, path string, off int64) error {
	var st fileStamp
	if fi, err := os.Stat(ff.name); err == nil {
		st = fileStamp{size: fi.Size(), mtime: fi.ModTime(), exists: true}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ino = int64(sys.Ino)
		}
	}
	ff.mu.Lock()
	if !ff.loaded || st != ff.stamp {
		ff.stamp, ff.loaded = st, true
		ff.cur, ff.err = ff.load(st.exists)
	}
	cur, err := ff.cur, ff.err
	ff.mu.Unlock()
	if err != nil {
		return err
	}
	return cur.apply(op, path, off)
}

// load reads and parses the file.
func (ff *faultFile) load(exists bool) (*fault, error) {
	if !exists {
		return parseFault("")
	}
	b, err := os.ReadFile(ff.name)
	if errors.Is(err, os.ErrNotExist) {
		return parseFault("")
	}
	if err != nil {
		return nil, fmt.Errorf("fault file: %w", err)
	}
	f, err := parseFault(string(b))
	if err != nil {
		return nil, fmt.Errorf("fault file %s: %w", ff.name, err)
	}
	return f, nil
}
