package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/stats"
)

// statsServer serves a recorder's snapshot at /v1/stats over a unix socket
// in a temporary directory, as a mount's control socket does. It returns
// the socket path and the number of requests served so far.
func statsServer(t *testing.T, r *stats.Recorder, onRequest func(n int64)) (string, *atomic.Int64) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "control.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, req *http.Request) {
		files := 0
		if v := req.URL.Query().Get("files"); v != "" {
			var err error
			if files, err = strconv.Atoi(v); err != nil {
				http.Error(w, "bad files", http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r.Snapshot(files))
		if onRequest != nil {
			onRequest(n.Add(1))
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return sock, &n
}

// statsRecorder returns a recorder with one cold and one half-warm epoch.
func statsRecorder() *stats.Recorder {
	const files, size = 4, 1 << 20
	r := stats.New(stats.Options{
		Files: files, DatasetBytes: files * size, CacheBytes: files * size / 2,
		PathOf: func(id uint32) string { return []string{"a.jpg", "b.jpg", "c.jpg", "d.jpg"}[id] },
	})
	for f := range uint32(files) {
		r.Read(f, stats.Backend, size, 10*time.Millisecond)
	}
	for f := range uint32(files) {
		src, blocked := stats.Memory, time.Duration(0)
		if f >= 2 {
			src, blocked = stats.Backend, 5*time.Millisecond
		}
		r.Read(f, src, size, blocked)
	}
	return r
}

// runStats runs `stallfs stats ARGS...` with the socket finder given.
func runStats(ctx context.Context, find func(string) (string, error), args ...string) (string, error) {
	var out bytes.Buffer
	app := &cli.App{
		Name:           "stallfs",
		Writer:         &out,
		ErrWriter:      &out,
		ExitErrHandler: func(*cli.Context, error) {},
		Commands:       []*cli.Command{statsCommandWith(find)},
	}
	err := app.RunContext(ctx, append([]string{"stallfs", "stats"}, args...))
	return out.String(), err
}

func TestStatsCommandJSON(t *testing.T) {
	r := statsRecorder()
	sock, _ := statsServer(t, r, nil)
	mnt := t.TempDir()
	find := func(p string) (string, error) {
		if p != mnt {
			t.Errorf("socket finder asked for %q, want %q", p, mnt)
		}
		return sock, nil
	}
	out, err := runStats(t.Context(), find, "--json", "--files", "2", mnt)
	if err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	var s stats.Snapshot
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not a snapshot: %v\n%s", err, out)
	}
	want := r.Snapshot(2)
	if s.Totals.BytesBySource != want.Totals.BytesBySource || s.Totals.Reads != want.Totals.Reads {
		t.Fatalf("totals = %+v, want %+v", s.Totals, want.Totals)
	}
	if len(s.Files) != 2 || s.Files[0].StallSeconds < s.Files[1].StallSeconds || s.Files[0].Path == "" {
		t.Fatalf("files = %+v, want 2 ordered by stall with paths", s.Files)
	}
	if len(s.Epochs) != 2 || s.Epochs[0].FetchStallSeconds <= s.Epochs[1].FetchStallSeconds {
		t.Fatalf("epochs = %+v, want epoch 1 stalled more than epoch 2", s.Epochs)
	}
}

func TestStatsCommandText(t *testing.T) {
	sock, _ := statsServer(t, statsRecorder(), nil)
	find := func(string) (string, error) { return sock, nil }
	out, err := runStats(t.Context(), find, "--what-if", "25%,100%,8MiB", "--consumer-rate", "1GiB/s", t.TempDir())
	if err != nil {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	for _, want := range []string{
		"by source", "memory 2.0 MiB", "backend 6.0 MiB", "EPOCH", "CACHE TIER", "STALL",
		"a.jpg", "WHAT-IF", "S backend rate", "R consumer rate  1.0 GiB/s",
		"2.0 MiB (now)", "1.0 MiB ", "4.0 MiB ", "8.0 MiB ", "stall-free cache:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Columns are aligned: every epoch row starts its second column where the header does.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "EPOCH") {
			col := strings.Index(l, "START")
			for _, row := range lines[i+1 : i+3] {
				if len(row) <= col || row[col-1] != ' ' || row[col] == ' ' {
					t.Errorf("epoch row %q not aligned with header %q", row, l)
				}
			}
		}
	}
}

func TestStatsCommandWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sock, n := statsServer(t, statsRecorder(), func(n int64) {
		if n == 3 {
			cancel()
		}
	})
	out, err := runStats(ctx, func(string) (string, error) { return sock, nil }, "--watch", "1ms", t.TempDir())
	if err != nil {
		t.Fatalf("stats --watch ended by its context: %v, want nil", err)
	}
	if n.Load() < 3 || strings.Count(out, "\x1b[H\x1b[2J") < 2 {
		t.Fatalf("%d requests, %d redraws; want >= 3 and >= 2", n.Load(), strings.Count(out, "\x1b[H\x1b[2J"))
	}
}

func TestStatsCommandNotAMount(t *testing.T) {
	dir := t.TempDir()
	noSocket := func(string) (string, error) { return filepath.Join(dir, "none.sock"), nil }
	tests := []struct {
		name string
		find func(string) (string, error)
		args []string
		want string
	}{
		{"no socket", noSocket, []string{dir}, "is not a stallfs mount"},
		{"finder fails", func(string) (string, error) { return "", errors.New("no xattr") }, []string{dir}, "is not a stallfs mount"},
		{"missing path", noSocket, []string{filepath.Join(dir, "nope")}, "no such file or directory"},
		{"no argument", noSocket, nil, "expected MOUNTPOINT"},
		{"bad what-if", noSocket, []string{"--what-if", "lots", dir}, "--what-if"},
		{"bad rate", noSocket, []string{"--consumer-rate", "fast", dir}, "--consumer-rate"},
		{"negative files", noSocket, []string{"--files", "-1", dir}, "--files"},
	}
	for _, tc := range tests {
		out, err := runStats(t.Context(), tc.find, tc.args...)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v (exit %d), output %q; want exit 2 naming %q", tc.name, err, exitCode(err), out, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tc.name, err)
		}
	}
}

func TestStatsParseBudgets(t *testing.T) {
	got, err := statsParseBudgets("50%, 100% ,64GiB")
	if err != nil || len(got) != 3 || got[0].share != 0.5 || got[0].bytes != -1 || got[1].share != 1 || got[2].bytes != 64<<30 {
		t.Fatalf("budgets = %+v, %v", got, err)
	}
}
