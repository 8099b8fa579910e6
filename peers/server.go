package peers

import (
	"context"
	"errors"
	"hash/crc32"
	iofs "io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ItemSource serves whole items of the group's dataset: from its cache, or
// through its own deduplicated fill from the backend (fs.Mount implements
// it). It must return an error satisfying errors.Is(err, fs.ErrNotExist)
// for a path, version or chunk that is not part of the dataset, and must
// not ask other peers.
type ItemSource interface {
	ServeItem(ctx context.Context, path, version string, chunk int64) ([]byte, error)
}

// CRCHeader carries the item's CRC32C (Castagnoli), in decimal.
const CRCHeader = "X-Stallfs-Crc32c"

// BudgetHeader carries the answering member's cache budget in bytes, in
// decimal, on GET /v1/health (absent: not reported).
const BudgetHeader = "X-Stallfs-Cache-Bytes"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// serverStats counts what a member served to the others.
type serverStats struct {
	requests     atomic.Int64 // item requests answered with the item
	bytes        atomic.Int64
	unauthorized atomic.Int64
	rejected     atomic.Int64 // authenticated but bad or unknown items
	misdirected  atomic.Int64 // items this member thinks another one owns
	failed       atomic.Int64 // the source failed
}

// handler serves GET /v1/item and GET /v1/health to other members.
type handler struct {
	src    ItemSource // nil: health only
	secret []byte
	// remote reports whether another live member owns an item, in this
	// member's view (nil: never).
	remote func(path, version string, chunk int64) bool
	now    func() time.Time
	st     *serverStats
	budget int64 // this member's cache budget (< 0: not reported)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := verify(r, h.secret, h.now()); err != nil {
		h.st.unauthorized.Add(1)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/v1/health":
		if h.budget >= 0 {
			w.Header().Set(BudgetHeader, strconv.FormatInt(h.budget, 10))
		}
		w.WriteHeader(http.StatusOK)
	case "/v1/item":
		h.serveItem(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *handler) serveItem(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, version := q.Get("path"), q.Get("version")
	chunk, err := strconv.ParseInt(q.Get("chunk"), 10, 64)
	if err != nil || chunk < 0 || !validPath(p) || h.src == nil {
		h.st.rejected.Add(1)
		http.Error(w, "bad item request", http.StatusBadRequest)
		return
	}
	// Members that disagree on who is live could each send the other an
	// item's fill and wait on it until the item timeout; refusing an item
	// this member would itself ask a peer for breaks that cycle at once
	// (the asker reads the backend).
	if h.remote != nil && h.remote(p, version, chunk) {
		h.st.misdirected.Add(1)
		http.Error(w, "not the owner of this item", http.StatusMisdirectedRequest)
		return
	}
	data, err := h.src.ServeItem(r.Context(), p, version, chunk)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		h.st.rejected.Add(1)
		http.Error(w, "no such item", http.StatusNotFound)
		return
	case err != nil:
		h.st.failed.Add(1)
		http.Error(w, "item unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set(CRCHeader, strconv.FormatUint(uint64(crc32.Checksum(data, castagnoli)), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := w.Write(data); err == nil {
		h.st.requests.Add(1)
		h.st.bytes.Add(int64(len(data)))
	}
}

// validPath accepts only clean, relative, slash-separated paths without
// "." or ".." elements: the shape of a dataset path.
func validPath(p string) bool {
	return p != "" && p != "." && iofs.ValidPath(p) && !strings.ContainsAny(p, "\x00\\")
}
