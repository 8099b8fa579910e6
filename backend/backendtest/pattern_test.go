package backendtest

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestPatternOffsets(t *testing.T) {
	const path = "train/n01440764/n01440764_18.JPEG"
	whole := PatternBytes(path, 1000)
	for off := range 40 {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 500} {
			got := make([]byte, n)
			Pattern(path, int64(off), got)
			if !bytes.Equal(got, whole[off:off+n]) {
				t.Fatalf("Pattern(off %d, %d bytes) is not bytes %d.. of PatternBytes", off, n, off)
			}
		}
	}
	if bytes.Equal(PatternBytes("a", 64), PatternBytes("b", 64)) {
		t.Errorf("two paths have the same content")
	}
}

// TestPatternGolden freezes the pattern: datasets generated with it must
// stay checkable.
func TestPatternGolden(t *testing.T) {
	got := hex.EncodeToString(PatternBytes("a/b", 16))
	const want = "ea8674f5d1399056840fdc0b35be7317"
	if got != want {
		t.Errorf("PatternBytes(\"a/b\", 16) = %s, want %s", got, want)
	}
}
