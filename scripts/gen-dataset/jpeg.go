package main

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
)

// minJPEG is the smallest file -jpeg can make: a tiny image's encoding fits
// below it, and padding makes up the rest.
const minJPEG = 4 << 10

// jpegQuality is the encoder quality; ImageNet's JPEGs are mostly 75-95.
const jpegQuality = 90

// jpegMaker makes decodable JPEGs of exact sizes.
type jpegMaker struct {
	// immutable after newJPEGMaker
	bytesPerPixel float64 // of the synthetic content at jpegQuality
}

func newJPEGMaker() (*jpegMaker, error) {
	var buf bytes.Buffer
	const w, h = 320, 240
	if err := jpeg.Encode(&buf, synthImage(w, h, 0), &jpeg.Options{Quality: jpegQuality}); err != nil {
		return nil, fmt.Errorf("calibrate JPEG size: %w", err)
	}
	return &jpegMaker{bytesPerPixel: float64(buf.Len()) / (w * h)}, nil
}

// make appends to buf (which it resets) the JPEG of file spec f: an image
// sized so that its encoding lands at about 85% of f.size, then comment
// segments of pattern bytes up to exactly f.size.
func (m *jpegMaker) make(f fileSpec, buf *bytes.Buffer) error {
	pixels := 0.85 * float64(f.size) / m.bytesPerPixel
	for range 8 {
		w := max(8, int(math.Round(math.Sqrt(pixels*4/3))))
		h := max(8, w*3/4)
		buf.Reset()
		if err := jpeg.Encode(buf, synthImage(w, h, f.index), &jpeg.Options{Quality: jpegQuality}); err != nil {
			return fmt.Errorf("encode %s: %w", f.path, err)
		}
		if int64(buf.Len()) <= f.size {
			padJPEG(buf, f)
			return nil
		}
		pixels *= 0.8 * float64(f.size) / float64(buf.Len())
	}
	return fmt.Errorf("%s: cannot encode a JPEG of at most %d bytes", f.path, f.size)
}

// padJPEG grows the encoded image in buf to f.size bytes with COM segments
// right after SOI, filled with the file's pattern bytes; 1-3 bytes that
// cannot form a segment go after EOI, where decoders stop reading.
func padJPEG(buf *bytes.Buffer, f fileSpec) {
	enc := bytes.Clone(buf.Bytes())
	pad := int(f.size) - len(enc)
	buf.Reset()
	buf.Write(enc[:2]) // SOI
	off := int64(0)
	for pad >= 4 {
		n := min(pad, 65537) // 4-byte header + up to 65533 bytes
		if rest := pad - n; rest > 0 && rest < 4 {
			n -= 4 // leave a remainder that forms a segment
		}
		data := make([]byte, n-4)
		pattern(f.path, off, data)
		off += int64(len(data))
		buf.Write([]byte{0xFF, 0xFE, byte((n - 2) >> 8), byte(n - 2)})
		buf.Write(data)
		pad -= n
	}
	buf.Write(enc[2:])
	for range pad {
		buf.WriteByte(0)
	}
}

// synthImage draws w x h pixels of smooth colour gradients under noise, a
// stand-in for a photo: the noise keeps the encoder (and any decoder) busy
// with real coefficients, and the gradients vary with index.
func synthImage(w, h int, index uint64) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r0 := mix(index, 5<<40)
	fx := [3]float64{}
	fy := [3]float64{}
	for c := range 3 {
		fx[c] = 1 + float64((r0>>(8*c))&7)
		fy[c] = 1 + float64((r0>>(8*c+4))&7)
	}
	// sin(a+b) = sin a cos b + cos a sin b: one table per axis, no
	// trigonometry per pixel.
	var sx, cx [3][]float64
	var sy, cy [3][]float64
	for c := range 3 {
		sx[c], cx[c] = make([]float64, w), make([]float64, w)
		for x := range w {
			sx[c][x], cx[c][x] = math.Sincos(fx[c] * float64(x) / float64(w) * math.Pi)
		}
		sy[c], cy[c] = make([]float64, h), make([]float64, h)
		for y := range h {
			sy[c][y], cy[c][y] = math.Sincos(fy[c] * float64(y) / float64(h) * math.Pi)
		}
	}
	rng := r0 | 1
	for y := range h {
		row := img.Pix[y*img.Stride:]
		for x := range w {
			// xorshift64 noise in [-24, 24)
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			for c := range 3 {
				g := 128 + 100*(sx[c][x]*cy[c][y]+cx[c][x]*sy[c][y])
				v := int(g) + int((rng>>(16*c))&47) - 24
				row[4*x+c] = byte(min(max(v, 0), 255))
			}
			row[4*x+3] = 255
		}
	}
	return img
}
