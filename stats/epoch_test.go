package stats

import (
	"math/rand/v2"
	"testing"
	"time"
)

// readAll reads the files in order, each as one part of size bytes.
func readAll(r *Recorder, order []int, size int64) {
	for _, f := range order {
		r.Read(uint32(f), Memory, size, 0)
	}
}

// closedEpochs returns the complete rows of a snapshot.
func closedEpochs(s Snapshot) []EpochRow {
	var out []EpochRow
	for _, e := range s.Epochs {
		if e.Complete {
			out = append(out, e)
		}
	}
	return out
}

func TestEpochFullPass(t *testing.T) {
	const files = 1000
	r := New(Options{Files: files})
	rng := rand.New(rand.NewPCG(7, 7))
	for range 3 {
		readAll(r, rng.Perm(files), 100)
	}
	s := r.Snapshot(0)
	got := closedEpochs(s)
	if len(got) != 3 || len(s.Epochs) != 3 {
		t.Fatalf("closed epochs = %d of %d rows, want 3 of 3", len(got), len(s.Epochs))
	}
	for i, e := range got {
		if e.Epoch != int64(i+1) || e.Files != files || e.Bytes != files*100 || e.Reads != files || e.EndReason != "full_pass" {
			t.Fatalf("epoch row %d = %+v, want epoch %d, %d files, %d bytes, full_pass", i, e, i+1, files, files*100)
		}
	}
	if s.Epoch != 4 {
		t.Fatalf("current epoch = %d, want 4", s.Epoch)
	}
}

func TestEpochRereadAfterMost(t *testing.T) {
	const files = 100
	r := New(Options{Files: files})
	// 95 files of epoch 1, then epoch 2 begins: file 50 again, then the rest.
	for f := range 95 {
		r.Read(uint32(f), Memory, 10, 0)
	}
	for f := range files {
		r.Read(uint32((f+50)%files), Memory, 10, 0)
	}
	got := closedEpochs(r.Snapshot(0))
	if len(got) != 2 {
		t.Fatalf("closed epochs = %+v, want 2", got)
	}
	if got[0].Files != 95 || got[0].EndReason != "reread" {
		t.Fatalf("epoch 1 = %d files (%s), want 95 (reread)", got[0].Files, got[0].EndReason)
	}
	if got[0].Reads != 95 || got[1].Reads != files {
		t.Fatalf("epoch reads %d, %d, want 95, %d (the re-read opens epoch 2)", got[0].Reads, got[1].Reads, files)
	}
	if got[1].Files != files || got[1].EndReason != "full_pass" {
		t.Fatalf("epoch 2 = %d files (%s), want %d (full_pass)", got[1].Files, got[1].EndReason, files)
	}
}

// TestEpochRereadOfEarlyFile: files first read at the start of an epoch
// may be the previous epoch's leftovers; their re-read ends nothing.
func TestEpochRereadOfEarlyFile(t *testing.T) {
	const files = 100
	r := New(Options{Files: files})
	for f := range 95 {
		r.Read(uint32(f), Memory, 10, 0)
	}
	r.Read(2, Memory, 10, 0) // read as the 3rd of 100: early
	if got := closedEpochs(r.Snapshot(0)); len(got) != 0 {
		t.Fatalf("closed epochs = %+v, want none", got)
	}
	r.Read(60, Memory, 10, 0)
	if got := closedEpochs(r.Snapshot(0)); len(got) != 1 || got[0].Reads != 96 {
		t.Fatalf("closed epochs = %+v, want one of 96 reads", got)
	}
}

func TestEpochRereadBeforeMostIsSameEpoch(t *testing.T) {
	const files = 100
	r := New(Options{Files: files})
	for f := range 50 {
		r.Read(uint32(f), Memory, 10, 0)
		r.Read(uint32(f), Memory, 10, 0) // a second read at 50%: no boundary
	}
	if got := closedEpochs(r.Snapshot(0)); len(got) != 0 {
		t.Fatalf("closed epochs = %+v, want none", got)
	}
}

func TestEpochMultiPartFiles(t *testing.T) {
	const files, size, part = 20, 1000, 300
	r := New(Options{Files: files, SizeOf: func(uint32) int64 { return size }})
	for range 2 {
		for f := range files {
			for off := int64(0); off < size; off += part {
				r.Read(uint32(f), Disk, min(part, size-off), 0)
			}
		}
	}
	got := closedEpochs(r.Snapshot(0))
	if len(got) != 2 {
		t.Fatalf("closed epochs = %+v, want 2", got)
	}
	for _, e := range got {
		if e.Files != files || e.Bytes != files*size || e.Reads != files*4 {
			t.Fatalf("epoch %d: %d files %d bytes %d reads, want %d %d %d", e.Epoch, e.Files, e.Bytes, e.Reads, files, files*size, files*4)
		}
	}
}

func TestSetEpochOverrides(t *testing.T) {
	const files = 10
	r := New(Options{Files: files})
	r.SetEpoch(0) // PyTorch numbers epochs from 0; nothing read yet: no row
	readAll(r, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1}, 1)
	r.SetEpoch(1)
	readAll(r, []int{2, 3, 4}, 1)
	s := r.Snapshot(0)
	if len(s.Epochs) != 2 {
		t.Fatalf("rows = %+v, want 2", s.Epochs)
	}
	e0, e1 := s.Epochs[0], s.Epochs[1]
	if e0.Epoch != 0 || e0.Reads != 12 || e0.Files != 10 || e0.EndReason != "explicit" {
		t.Fatalf("epoch 0 = %+v, want 12 reads of 10 files, explicit (no automatic boundary after SetEpoch)", e0)
	}
	if e1.Epoch != 1 || e1.Complete || e1.Reads != 3 {
		t.Fatalf("epoch 1 = %+v, want open with 3 reads", e1)
	}
	if s.Epoch != 1 {
		t.Fatalf("current epoch = %d, want 1", s.Epoch)
	}
}

// TestEpochLoaderWindow reads each epoch in a fresh random order through a
// DataLoader-like window: 8 workers each own consecutive batches, and the
// reads of the next epoch start before the last batches of this one end.
func TestEpochLoaderWindow(t *testing.T) {
	const files, epochs, window = 2000, 4, 64
	r := New(Options{Files: files})
	rng := rand.New(rand.NewPCG(3, 4))
	var seq []int
	for range epochs {
		seq = append(seq, rng.Perm(files)...)
	}
	// Shuffle inside a sliding window of 64 positions, across epoch borders.
	for i := 0; i+window <= len(seq); i += window / 2 {
		w := seq[i : i+window]
		rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
	}
	readAll(r, seq, 1)
	s := r.Snapshot(0)
	got := closedEpochs(s)
	if len(got) < epochs-1 || len(got) > epochs {
		t.Fatalf("closed epochs = %d, want %d or %d", len(got), epochs-1, epochs)
	}
	var total int64
	for _, e := range s.Epochs {
		total += e.Bytes
		if e.Complete && (e.Bytes < files-window || e.Bytes > files+window) {
			t.Fatalf("epoch %d read %d files' bytes, want %d +- %d", e.Epoch, e.Bytes, files, window)
		}
	}
	if total != files*epochs {
		t.Fatalf("epochs sum to %d, want %d", total, files*epochs)
	}
}

func TestEpochRowsBounded(t *testing.T) {
	r := New(Options{Files: 1})
	for range maxEpochRows + 5 {
		r.Read(0, Memory, 1, 0) // one file: every read is a full pass
	}
	s := r.Snapshot(0)
	if len(s.Epochs) != maxEpochRows || s.EpochsDropped != 5 {
		t.Fatalf("rows %d dropped %d, want %d and 5", len(s.Epochs), s.EpochsDropped, maxEpochRows)
	}
	if s.Epochs[0].Epoch != 6 || s.Epoch != maxEpochRows+6 {
		t.Fatalf("first row epoch %d current %d, want 6 and %d", s.Epochs[0].Epoch, s.Epoch, maxEpochRows+6)
	}
}

func TestEpochTagWraps(t *testing.T) {
	if tagOf(1) != 1 || tagOf(1<<tagBits-1) != 1<<tagBits-1 || tagOf(1<<tagBits) != 1 {
		t.Fatalf("tags 1, max, max+1 = %d %d %d", tagOf(1), tagOf(1<<tagBits-1), tagOf(1<<tagBits))
	}
	_ = time.Second
}
