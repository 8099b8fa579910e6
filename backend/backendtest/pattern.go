package backendtest

import "github.com/stallfs/stallfs/backend/backendtest/pattern"

// Pattern fills p with the deterministic test content of the object at path,
// starting at byte offset off: pattern.Fill, so that any byte of any
// object can be checked without keeping the object. scripts/gen-dataset
// writes the same content, keyed by the path relative to the dataset root.
func Pattern(path string, off int64, p []byte) {
	pattern.Fill(path, off, p)
}

// PatternBytes returns the first n bytes of the test content of path.
func PatternBytes(path string, n int) []byte {
	p := make([]byte, n)
	Pattern(path, 0, p)
	return p
}
