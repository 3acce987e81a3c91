package simulator

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
)

// PNG is a real n×n PNG image (a diagonal line), what the tools and tests
// upload and the publisher streams to stash/submit.
func PNG(n int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	for i := range n {
		img.Set(i, i, color.RGBA{R: 200, A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("encoding an in-memory PNG: " + err.Error()) // an RGBA image always encodes
	}
	return buf.Bytes()
}
