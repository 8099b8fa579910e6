package main

import "encoding/binary"

// pattern fills p with bytes off.. of the content of the file at path. It
// is backendtest.Pattern (the test checks that they agree), copied so this
// program needs the standard library only.
func pattern(path string, off int64, p []byte) {
	s := uint64(14695981039346656037) // FNV-1a of path
	for i := 0; i < len(path); i++ {
		s ^= uint64(path[i])
		s *= 1099511628211
	}
	w := uint64(off) / 8
	var buf [8]byte
	if skip := int(uint64(off) % 8); skip != 0 {
		binary.LittleEndian.PutUint64(buf[:], patternWord(s, w))
		n := copy(p, buf[skip:])
		p = p[n:]
		w++
	}
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, patternWord(s, w))
		p = p[8:]
		w++
	}
	if len(p) > 0 {
		binary.LittleEndian.PutUint64(buf[:], patternWord(s, w))
		copy(p, buf[:])
	}
}

func patternWord(s, w uint64) uint64 {
	z := s + (w+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
