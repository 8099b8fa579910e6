package backendtest

import "github.com/stallfs/stallfs/internal/testpattern"

// Pattern fills p with the deterministic test content of the object at path,
// starting at byte offset off: testpattern.Fill, so that any byte of any
// object can be checked without keeping the object. scripts/gen-dataset
// writes the same content, keyed by the path relative to the dataset root.
func Pattern(path string, off int64, p []byte) {
	testpattern.Fill(path, off, p)
}

// PatternBytes returns the first n bytes of the test content of path.
func PatternBytes(path string, n int) []byte {
	p := make([]byte, n)
	Pattern(path, 0, p)
	return p
}
