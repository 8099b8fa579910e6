package main

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"

	"github.com/stallfs/stallfs/backend/backendtest/pattern"
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
		pattern.Fill(f.path, off, data)
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

// synthImage draws w x h pixels of smooth gradients under noise, a
// stand-in for a photo: the noise keeps the encoder (and any decoder) busy
// with real coefficients, and the gradients vary with index. It is drawn in
// 4:2:0 YCbCr, as most photos are stored, so the encoder copies it without
// a colour conversion.
func synthImage(w, h int, index uint64) *image.YCbCr {
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	r0 := mix(index, 5<<40)
	// Each plane is 128 + a*sin(fx*x + fy*y) + noise; sin(u+v) = sin u cos v
	// + cos u sin v, so the trigonometry is per row and column, not pixel.
	// noise must be a power of two.
	plane := func(pix []byte, stride, pw, ph int, shift uint, amp float64, noise uint64) {
		rng := r0>>shift | 1
		mask := 2*noise - 1
		fx := (1 + float64((r0>>shift)&7)) * math.Pi / float64(pw)
		fy := (1 + float64((r0>>(shift+4))&7)) * math.Pi / float64(ph)
		sx, cx := make([]float64, pw), make([]float64, pw)
		for x := range pw {
			sx[x], cx[x] = math.Sincos(fx * float64(x))
		}
		for y := range ph {
			sy, cy := math.Sincos(fy * float64(y))
			row := pix[y*stride : y*stride+pw]
			for x := range row {
				rng ^= rng << 13 // xorshift64
				rng ^= rng >> 7
				rng ^= rng << 17
				v := int(128+amp*(sx[x]*cy+cx[x]*sy)) + int(rng&mask) - int(noise)
				row[x] = byte(min(max(v, 0), 255))
			}
		}
	}
	cw, ch := (w+1)/2, (h+1)/2
	plane(img.Y, img.YStride, w, h, 0, 90, 16)
	plane(img.Cb, img.CStride, cw, ch, 8, 60, 8)
	plane(img.Cr, img.CStride, cw, ch, 16, 60, 8)
	return img
}
