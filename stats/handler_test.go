package stats

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandler(t *testing.T) {
	r := New(Options{Files: 3})
	r.Read(0, Memory, 10, 0)
	r.Read(1, Disk, 20, 0)
	h := r.Handler()
	tests := []struct {
		method, url string
		code, files int
	}{
		{"GET", "/v1/stats", 200, 0},
		{"GET", "/v1/stats?files=1", 200, 1},
		{"GET", "/v1/stats?files=-1", 400, 0},
		{"GET", "/v1/stats?files=x", 400, 0},
		{"POST", "/v1/stats", 405, 0},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.url, nil))
		if rec.Code != tc.code {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.url, rec.Code, tc.code)
			continue
		}
		if tc.code != http.StatusOK {
			continue
		}
		var s Snapshot
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if len(s.Files) != tc.files || s.Totals.Bytes != 30 {
			t.Errorf("%s: %d files, %d bytes; want %d, 30", tc.url, len(s.Files), s.Totals.Bytes, tc.files)
		}
	}
}

func TestEmptyFilesDoNotBlockFullPass(t *testing.T) {
	sizes := []int64{10, 0, 10}
	r := New(Options{Files: 3, SizeOf: func(id uint32) int64 { return sizes[id] }})
	r.Read(0, Memory, 10, 0)
	r.Read(2, Memory, 10, 0)
	if got := closedEpochs(r.Snapshot(0)); len(got) != 1 || got[0].EndReason != "full_pass" {
		t.Fatalf("closed epochs = %+v, want one full pass without the empty file", got)
	}
}
