package prefetch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// These tests compare against the real PyTorch and torchvision, run by
// Debian's /usr/bin/python3 (not whatever python3 is first on PATH).
const (
	torchPython  = "/usr/bin/python3"
	torchInstall = "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch python3-torchvision"
)

type torchCase map[string]any

// runTorch runs testdata/torch/orders.py over cases and decodes result i
// into outs[i].
func runTorch(t *testing.T, cases []torchCase, outs []any) {
	t.Helper()
	if err := exec.CommandContext(t.Context(), torchPython, "-c", "import torch, torchvision").Run(); err != nil {
		t.Fatalf("%s cannot import torch and torchvision (%v); install them with:\n  %s", torchPython, err, torchInstall)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), torchPython, filepath.Join("..", "testdata", "torch", "orders.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("orders.py: %v\n%s", err, stderr.String())
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("orders.py output: %v", err)
	}
	if len(raw) != len(outs) {
		t.Fatalf("orders.py returned %d results, want %d", len(raw), len(outs))
	}
	for i := range raw {
		if err := json.Unmarshal(raw[i], outs[i]); err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
	}
}

func digest(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	s := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(s[:])
}

// compareEpoch compares got against a JSON result that is either a list
// of indices or a sha256 digest of their comma-joined decimal form.
func compareEpoch(t *testing.T, what string, got []int, want json.RawMessage) {
	t.Helper()
	var h string
	if json.Unmarshal(want, &h) == nil {
		if g := digest(got); g != h {
			t.Errorf("%s: digest %s, torch %s", what, g[:12], h[:12])
		}
		return
	}
	var w []int
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !slices.Equal(got, w) {
		t.Errorf("%s:\n got %v\nwant %v", what, clip(got), clip(w))
	}
}

func clip(x []int) []int { return x[:min(len(x), 20)] }

// refCheck compares Go's orders with the reference results once they are
// decoded; v is the installed torch's randperm variant.
type refCheck func(t *testing.T, v TorchVersion)

// TestMatchesPyTorch runs the real PyTorch once (importing torch costs
// seconds on a busy machine) for every reference and then compares.
func TestMatchesPyTorch(t *testing.T) {
	var cases []torchCase
	var outs []any
	var version struct{ Torch, Torchvision string }
	cases, outs = append(cases, torchCase{"kind": "version"}), append(outs, &version)
	checks := map[string]refCheck{}
	for name, build := range map[string]func(*testing.T, *[]torchCase, *[]any) refCheck{
		"samplers":    samplerRefs,
		"global":      globalRefs,
		"imagefolder": imageFolderRefs,
		"dataloader":  loaderReadRefs,
	} {
		checks[name] = build(t, &cases, &outs)
	}
	runTorch(t, cases, outs)
	v, err := ParseTorchVersion(version.Torch)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reference: torch %s, torchvision %s (randperm variant %v)", version.Torch, version.Torchvision, v)
	for name, check := range checks {
		t.Run(name, func(t *testing.T) { check(t, v) })
	}
}

func samplerRefs(t *testing.T, casesp *[]torchCase, outsp *[]any) refCheck {
	const epochs = 4
	type rnd struct {
		n, seed, numSamples int
		replacement         bool
	}
	var rnds []rnd
	for _, n := range []int{1, 2, 10, 1000} {
		for _, seed := range []int{0, 1, 7, 1<<32 + 7, 123456789} {
			rnds = append(rnds, rnd{n, seed, 0, false})
		}
		rnds = append(rnds, rnd{n, 3, 5, false}, rnd{n, 3, 2*n + 3, false}, rnd{n, 4, 0, true}, rnd{n, 4, 3*n + 1, true})
	}
	type dist struct {
		n, seed, world int
		drop, shuffle  bool
		hash           bool
	}
	var dists []dist
	for _, n := range []int{1, 2, 10, 1000} {
		for seed := range 4 {
			for w := 1; w <= 8; w++ {
				for _, drop := range []bool{false, true} {
					dists = append(dists, dist{n, seed, w, drop, true, false})
				}
			}
		}
		dists = append(dists, dist{n, 0, 3, false, false, false}, dist{n, 0, 3, true, false, false})
	}
	const big = 1281167
	// Sizes over a million cost seconds per order under -race: one of each.
	dists = append(dists, dist{big, 5, 8, false, true, true})
	rnds = append(rnds, rnd{big - 1, 11, big + 5, false}) // a partial last permutation
	rnds = append(rnds, rnd{big, 42, 0, false})
	bigRanks := func(d dist) []int { return []int{0, d.world - 1} }

	cases, outs := *casesp, *outsp
	defer func() { *casesp, *outsp = cases, outs }()
	rres := make([][]json.RawMessage, len(rnds))
	for i, r := range rnds {
		c := torchCase{"kind": "random", "n": r.n, "seed": r.seed, "epochs": epochs, "replacement": r.replacement, "hash": r.n >= big-1}
		if r.numSamples > 0 {
			c["num_samples"] = r.numSamples
		}
		if r.n >= big-1 {
			c["epochs"] = 1
		}
		cases = append(cases, c)
		outs = append(outs, &rres[i])
	}
	dres := make([][][]json.RawMessage, len(dists))
	for i, d := range dists {
		c := torchCase{"kind": "distributed", "n": d.n, "seed": d.seed, "epochs": epochs, "world": d.world,
			"drop_last": d.drop, "shuffle": d.shuffle, "hash": d.hash}
		if d.hash {
			c["epochs"] = 1
			c["ranks"] = bigRanks(d)
		}
		cases = append(cases, c)
		outs = append(outs, &dres[i])
	}
	return func(t *testing.T, v TorchVersion) {
		compared := 0
		for i, r := range rnds {
			o, err := NewTorchRandom(r.n, uint64(r.seed), SamplerOptions{NumSamples: r.numSamples, Replacement: r.replacement, Version: v})
			if err != nil {
				t.Fatal(err)
			}
			// Ask for the last epoch first: the generator state is derived by
			// skipping the earlier epochs' draws.
			for e := len(rres[i]) - 1; e >= 0; e-- {
				got, err := o.Epoch(e)
				if err != nil {
					t.Fatal(err)
				}
				compareEpoch(t, fmt.Sprintf("RandomSampler %+v epoch %d", r, e), got, rres[i][e])
				compared++
			}
		}
		for i, d := range dists {
			ranks := make([]int, d.world)
			for r := range ranks {
				ranks[r] = r
			}
			if d.hash {
				ranks = bigRanks(d)
			}
			for k, rank := range ranks {
				o, err := NewTorchDistributed(d.n, DistributedOptions{Seed: uint64(d.seed), WorldSize: d.world, Rank: rank,
					DropLast: d.drop, NoShuffle: !d.shuffle, Version: v})
				if err != nil {
					t.Fatal(err)
				}
				for e := range dres[i] {
					got, err := o.Epoch(e)
					if err != nil {
						t.Fatal(err)
					}
					compareEpoch(t, fmt.Sprintf("DistributedSampler %+v rank %d epoch %d", d, rank, e), got, dres[i][e][k])
					compared++
				}
			}
		}
		t.Logf("%d orders equal to PyTorch's", compared)
	}
}

func globalRefs(t *testing.T, casesp *[]torchCase, outsp *[]any) refCheck {
	type glob struct {
		seed, pre, workers int
		persistent         bool
		numSamples         int
		replacement        bool
	}
	gs := []glob{
		{1234, 0, 0, false, 0, false},
		{1234, 5, 0, false, 0, false},
		{99, 3, 2, false, 0, false},
		{7, 0, 2, true, 0, false},
		{5, 1, 0, false, 70, false},
		{5, 1, 0, false, 0, true},
	}
	const n, epochs = 50, 3
	cases, outs := *casesp, *outsp
	defer func() { *casesp, *outsp = cases, outs }()
	type result struct {
		State  string
		Epochs [][]int
	}
	res := make([]result, len(gs))
	for i, g := range gs {
		c := torchCase{"kind": "global", "n": n, "manual_seed": g.seed, "pre_draws": g.pre, "epochs": epochs,
			"workers": g.workers, "persistent": g.persistent, "batch": 4, "replacement": g.replacement}
		if g.numSamples > 0 {
			c["num_samples"] = g.numSamples
		}
		if g.workers > 0 {
			c["epochs"] = 2 // each epoch forks workers: slow on a busy machine
		}
		cases = append(cases, c)
		outs = append(outs, &res[i])
	}
	return func(t *testing.T, v TorchVersion) {
		for i, g := range gs {
			state, err := hex.DecodeString(res[i].State)
			if err != nil {
				t.Fatal(err)
			}
			start, err := TorchStateFromBytes(state)
			if err != nil {
				t.Fatal(err)
			}
			opts := SamplerOptions{NumSamples: g.numSamples, Replacement: g.replacement, Version: v}
			orders := map[string]Order{}
			if orders["rng-state"], err = NewTorchGlobal(n, start, g.persistent, opts); err != nil {
				t.Fatal(err)
			}
			if g.pre == 0 {
				// Nothing drew from the global generator: the manual_seed value
				// alone must give the same orders.
				if orders["manual_seed"], err = NewTorchGlobal(n, NewTorchGenerator(uint64(g.seed)), g.persistent, opts); err != nil {
					t.Fatal(err)
				}
			}
			for name, o := range orders {
				for e, want := range res[i].Epochs {
					got, err := o.Epoch(e)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Errorf("DataLoader %+v from %s, epoch %d:\n got %v\nwant %v", g, name, e, clip(got), clip(want))
					}
				}
			}
		}
	}
}

func imageFolderRefs(t *testing.T, casesp *[]torchCase, outsp *[]any) refCheck {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	outside := filepath.Join(root, "outside")
	files := []string{
		"cat/a.jpg", "cat/B.JPG", "cat/c.Png", "cat/notes.txt", "cat/img.jpg.bak", "cat/x/1.jpg",
		"cat/x y/2.jpeg", "cat/x y/deep/3.tif", "cat/x-y/4.webp", "cat/x/z/5.bmp", "cat/x/z/6.TIFF",
		"cat/.hidden_dir/7.jpg", "cat/Ä.PPM", "cat/İ.JPG", "cat/x.y/8.pgm",
		"dog/only.jpeg", "dog/sub/9.png", "dog/sub/skip.gif",
		".ipynb_checkpoints/c.jpg",
		"Zeta/z.webp", "README.txt",
	}
	for i, f := range files {
		p := filepath.Join(data, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"linked/l1.jpg", "linked/deeper/l2.png", "cls/only.jpg"} {
		p := filepath.Join(outside, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symlinked directory inside a class and a symlinked class.
	if err := os.Symlink(filepath.Join(outside, "linked"), filepath.Join(data, "cat", "x", "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "cls"), filepath.Join(data, "linkcls")); err != nil {
		t.Fatal(err)
	}
	want := new([]string)
	*casesp = append(*casesp, torchCase{"kind": "imagefolder", "root": data})
	*outsp = append(*outsp, want)
	return func(t *testing.T, _ TorchVersion) {
		want := *want
		l, err := ImageFolder(os.DirFS(data), ImageFolderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := range l.Len() {
			got = append(got, l.Path(i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("imagefolder layout differs from torchvision:\n got %q\nwant %q", got, want)
		}
		// Paths map back to their index.
		for i, p := range want {
			if j, ok := l.Index(p); !ok || j != i {
				t.Errorf("Index(%q) = %d, %v; want %d", p, j, ok, i)
			}
		}
		t.Logf("%d samples equal to torchvision's", len(got))
	}
}

// loaderReadRefs records the order in which a real DataLoader's workers
// open the files of an ImageFolder under a DistributedSampler, and feeds
// it to a Prefetcher: every read must match the prediction.
func loaderReadRefs(t *testing.T, casesp *[]torchCase, outsp *[]any) refCheck {
	data := filepath.Join(t.TempDir(), "data")
	for i := range 203 {
		p := filepath.Join(data, fmt.Sprintf("class%d", i%5), fmt.Sprintf("img%03d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const world, rank, seed, epochs, workers, batch, pf = 2, 1, 3, 3, 4, 4, 2
	reads := new([][]string)
	*casesp = append(*casesp, torchCase{"kind": "loader_reads", "root": data, "world": world, "rank": rank, "seed": seed,
		"epochs": epochs, "workers": workers, "batch": batch, "prefetch_factor": pf, "drop_last": true})
	*outsp = append(*outsp, reads)
	return func(t *testing.T, v TorchVersion) {
		l, err := ImageFolder(os.DirFS(data), ImageFolderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o, err := NewTorchDistributed(l.Len(), DistributedOptions{Seed: seed, WorldSize: world, Rank: rank, Version: v})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Test(t, func(t *testing.T) {
			f := newFakeStore(time.Millisecond)
			p := New(l, o, f, Options{Ahead: 16, Concurrency: 4, Window: pf * workers * batch, CheckReads: 32})
			startPrefetcher(t, p)
			displaced := 0
			for e, paths := range *reads {
				want, _ := o.Epoch(e)
				for i, s := range paths {
					if j, _ := l.Index(s); j != want[i] {
						displaced++
					}
					p.Observe(s)
					synctest.Wait()
				}
			}
			s := reader0(p)
			if s.Disabled || s.Epoch != epochs-1 {
				t.Fatalf("after %d epochs of DataLoader reads: %+v", epochs, s)
			}
			for _, st := range s.Epochs[:epochs] {
				// drop_last: 102 items per rank, 25 batches of 4 read.
				if st.Observed != 100 || st.Matched != st.Observed {
					t.Errorf("epoch %d: observed %d, matched %d; want 100 matched", st.Epoch, st.Observed, st.Matched)
				}
			}
			t.Logf("%d of %d reads out of sampler order (worker reordering), all matched", displaced, 3*100)
		})
	}
}
