package prefetch

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// buildDALIShuffle compiles testdata/torch/dali_shuffle.cc (libstdc++'s
// std::shuffle over std::mt19937) into a temporary directory.
func buildDALIShuffle(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dali_shuffle")
	out, err := exec.CommandContext(t.Context(), "g++", "-O2", "-std=c++17", "-o", bin,
		filepath.Join("..", "testdata", "torch", "dali_shuffle.cc")).CombinedOutput()
	if err != nil {
		t.Fatalf("g++ dali_shuffle.cc: %v\n%s", err, out)
	}
	return bin
}

func cppShuffles(t *testing.T, bin string, n int, seeds ...uint32) [][]int {
	t.Helper()
	args := []string{strconv.Itoa(n)}
	for _, s := range seeds {
		args = append(args, strconv.FormatUint(uint64(s), 10))
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	var res [][]int
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		row := make([]int, len(f))
		for i, s := range f {
			if row[i], err = strconv.Atoi(s); err != nil {
				t.Fatalf("parse %q: %v", s, err)
			}
		}
		res = append(res, row)
	}
	if len(res) != len(seeds) {
		t.Fatalf("got %d lines, want %d", len(res), len(seeds))
	}
	return res
}

// TestDALIMatchesLibstdcxx builds the C++ reference once (g++ is slow on
// a busy machine) for both checks.
func TestDALIMatchesLibstdcxx(t *testing.T) {
	bin := buildDALIShuffle(t)
	t.Run("std::shuffle", func(t *testing.T) { testStdShuffle(t, bin) })
	t.Run("fn.readers.file", func(t *testing.T) { testDALIFileOrder(t, bin) })
}

func testStdShuffle(t *testing.T, bin string) {
	// 65535 is the largest n for which libstdc++ draws two positions per
	// call; 65536 and above take the one-per-call path.
	for _, n := range []int{1, 2, 3, 4, 10, 11, 1000, 4097, 65535, 65536, 100003} {
		seeds := []uint32{daliSeed, daliSeed + 1, daliSeed + 2, 0, 12345}
		want := cppShuffles(t, bin, n, seeds...)
		x := make([]int, n)
		for i := range x {
			x[i] = i
		}
		for k, s := range seeds {
			stdShuffle(x, newStdMT(s))
			if !slices.Equal(x, want[k]) {
				t.Fatalf("n=%d after shuffle #%d (seed %d): Go and libstdc++ differ (first 10: %v vs %v)",
					n, k, s, x[:min(10, n)], want[k][:min(10, n)])
			}
		}
	}
}

func testDALIFileOrder(t *testing.T, bin string) {
	const n = 1003
	shuffled := cppShuffles(t, bin, n, daliSeed)[0]
	chain := cppShuffles(t, bin, n, daliSeed+1, daliSeed+2, daliSeed+3)
	single := [][]int{
		cppShuffles(t, bin, n, daliSeed+1)[0],
		cppShuffles(t, bin, n, daliSeed+2)[0],
		cppShuffles(t, bin, n, daliSeed+3)[0],
	}
	identity := make([]int, n)
	for i := range identity {
		identity[i] = i
	}
	block := func(l []int, v, num int) []int { return l[n*v/num : n*(v+1)/num] }

	tests := []struct {
		name string
		opts DALIOptions
		want func(e int) []int
	}{
		{"plain", DALIOptions{}, func(int) []int { return identity }},
		{"random_shuffle", DALIOptions{RandomShuffle: true}, func(int) []int { return shuffled }},
		{"shards move", DALIOptions{RandomShuffle: true, ShardID: 2, NumShards: 3},
			func(e int) []int { return block(shuffled, (2+e)%3, 3) }},
		{"stick_to_shard", DALIOptions{RandomShuffle: true, ShardID: 2, NumShards: 3, StickToShard: true},
			func(int) []int { return block(shuffled, 2, 3) }},
		{"shuffle_after_epoch", DALIOptions{ShuffleAfterEpoch: true, ShardID: 1, NumShards: 4},
			func(e int) []int { return block(chain[e], 1, 4) }},
		{"shuffle_after_epoch checkpointing", DALIOptions{ShuffleAfterEpoch: true, Checkpointing: true},
			func(e int) []int { return single[e] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := NewDALIFile(n, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			// Ask out of order to exercise the cumulative reshuffle cache.
			for _, e := range []int{0, 2, 1, 2, 0} {
				got, err := o.Epoch(e)
				if err != nil {
					t.Fatal(err)
				}
				if want := tt.want(e); !slices.Equal(got, want) {
					t.Errorf("epoch %d: got %v..., want %v...", e, got[:5], want[:5])
				}
			}
		})
	}
}
