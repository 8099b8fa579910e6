package pattern

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// first returns the first n bytes of the content of path.
func first(path string, n int) []byte {
	p := make([]byte, n)
	Fill(path, 0, p)
	return p
}

func TestFillOffsets(t *testing.T) {
	const path = "train/n01440764/n01440764_18.JPEG"
	whole := first(path, 1000)
	for off := range 40 {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 500} {
			got := make([]byte, n)
			Fill(path, int64(off), got)
			if !bytes.Equal(got, whole[off:off+n]) {
				t.Fatalf("Fill(off %d, %d bytes) is not bytes %d.. of the content", off, n, off)
			}
		}
	}
	if bytes.Equal(first("a", 64), first("b", 64)) {
		t.Errorf("two paths have the same content")
	}
}

// TestFillGolden freezes the pattern: datasets generated with it must stay
// checkable.
func TestFillGolden(t *testing.T) {
	got := hex.EncodeToString(first("a/b", 16))
	const want = "ea8674f5d1399056840fdc0b35be7317"
	if got != want {
		t.Errorf("first 16 bytes of \"a/b\" = %s, want %s", got, want)
	}
}
