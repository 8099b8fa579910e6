package throttle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseFault(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"", true}, {"pass", true}, {"error", true}, {"hang count=2 ops=read,stat path=a/", true},
		{"explode", false}, {"error count=-1", false}, {"error ops=write", false}, {"error count", false}, {"error n=1", false},
	} {
		if _, err := ParseFault(tc.spec); (err == nil) != tc.ok {
			t.Errorf("ParseFault(%q) = %v, want ok %v", tc.spec, err, tc.ok)
		}
	}
}

func TestFaultSpecCountOpsPath(t *testing.T) {
	f, err := ParseFault("error count=2 ops=read,stat path=d/")
	if err != nil {
		t.Fatal(err)
	}
	tb := New(newFake(), Options{Fault: f})
	buf := make([]byte, 10)
	if _, err := tb.ReadAt(t.Context(), "b", "v", buf[:1], 0); err != nil {
		t.Errorf("read outside the path prefix: %v", err)
	}
	if _, err := tb.List(t.Context(), "d"); err != nil {
		t.Errorf("list (not a faulted operation): %v", err)
	}
	for i := range 2 {
		if _, err := tb.ReadAt(t.Context(), "d/c", "v", buf, 0); !errors.Is(err, ErrInjected) {
			t.Errorf("read %d of d/c: %v, want ErrInjected", i, err)
		}
	}
	if _, err := tb.Stat(t.Context(), "d/c"); err != nil {
		t.Errorf("third matching operation: %v, want the count used up", err)
	}
}

func TestHangUntilTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := ParseFault("hang")
		tb := New(newFake(), Options{Fault: f, Timeout: 2 * time.Second})
		start := time.Now()
		_, err := tb.ReadAt(t.Context(), "b", "v", make([]byte, 10), 0)
		if !errors.Is(err, ErrHang) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hung read: %v, want ErrHang and DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("hung read returned after %v, want the 2s timeout", d)
		}
		if _, err := tb.Stat(t.Context(), "b"); err != nil {
			t.Errorf("stat (not faulted): %v", err)
		}
	})
}

func TestFaultFileChanges(t *testing.T) {
	name := filepath.Join(t.TempDir(), "fault")
	tb := New(newFake(), Options{Fault: FaultFile(name)})
	read := func() error {
		_, err := tb.ReadAt(t.Context(), "b", "v", make([]byte, 10), 0)
		return err
	}
	write := func(spec string) {
		tmp := name + ".tmp"
		if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := read(); err != nil {
		t.Fatalf("no fault file: %v", err)
	}
	write("error count=1\n")
	if err := read(); !errors.Is(err, ErrInjected) {
		t.Fatalf("after error count=1: %v", err)
	}
	if err := read(); err != nil {
		t.Fatalf("count used up: %v", err)
	}
	write("error")
	for range 3 {
		if err := read(); !errors.Is(err, ErrInjected) {
			t.Fatalf("persistent error: %v", err)
		}
	}
	write("bogus")
	if err := read(); err == nil || errors.Is(err, ErrInjected) {
		t.Fatalf("bad spec: %v, want an error naming the spec", err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Fatalf("fault file removed: %v", err)
	}
}
