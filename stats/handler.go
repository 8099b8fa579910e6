package stats

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// maxTopFiles bounds the files a stats request may ask for.
const maxTopFiles = 100_000

// Handler serves the Snapshot as JSON: GET /v1/stats?files=N (N top files,
// default 0, at most 100,000). The control socket mounts it.
func (r *Recorder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		files, err := TopFilesParam(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		// The client may be gone; nothing to do about a failed write.
		_ = json.NewEncoder(w).Encode(r.Snapshot(files))
	})
}

// errTopFiles is the answer to a bad files parameter.
var errTopFiles = errors.New("files: want an integer in 0..100000")

// TopFilesParam reads the files=N parameter of a stats request (0 when
// absent): how many files, ordered by stall, the Snapshot should list.
func TopFilesParam(req *http.Request) (int, error) {
	v := req.URL.Query().Get("files")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxTopFiles {
		return 0, errTopFiles
	}
	return n, nil
}
