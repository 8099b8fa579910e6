// Package pattern is the deterministic content of stallfs's test and
// benchmark data: byte i of the object (or file) at path is a function of
// path and i alone, so any byte read anywhere can be checked without
// keeping the object. backend/backendtest (Pattern, PatternBytes) and
// scripts/gen-dataset both write it; the content is frozen (a golden test),
// since generated datasets must stay checkable. It uses encoding/binary
// only, so a program may import it without pulling in test machinery.
package pattern

import "encoding/binary"

// Fill fills p with bytes off.. of the content of path. Byte i of the
// content is byte i%8 (little endian) of word(seed(path), i/8), where seed
// is the 64-bit FNV-1a hash of path and word is the splitmix64 finaliser of
// seed + (i/8+1) times the golden-ratio constant.
func Fill(path string, off int64, p []byte) {
	s := seed(path)
	w := uint64(off) / 8
	var buf [8]byte
	if skip := int(uint64(off) % 8); skip != 0 {
		binary.LittleEndian.PutUint64(buf[:], word(s, w))
		n := copy(p, buf[skip:])
		p = p[n:]
		w++
	}
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, word(s, w))
		p = p[8:]
		w++
	}
	if len(p) > 0 {
		binary.LittleEndian.PutUint64(buf[:], word(s, w))
		copy(p, buf[:])
	}
}

// seed is the 64-bit FNV-1a hash of path.
func seed(path string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(path); i++ {
		h ^= uint64(path[i])
		h *= 1099511628211
	}
	return h
}

// word is the splitmix64 output for word index w of the stream seeded by s.
func word(s, w uint64) uint64 {
	z := s + (w+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
