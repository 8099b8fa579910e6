package prefetch

import (
	"fmt"
	"io"
)

// This file is what the mount's control socket needs: each request is one
// call.

// Apply installs the order Spec describes (GET/POST /v1/order's body):
// its readers, expected in epoch spec.Epoch. The layout is the one the
// prefetcher was made with; the layout fields of spec are ignored.
func (p *Prefetcher) Apply(spec Spec) error {
	rs, err := BuildReaders(spec, p.layout.Len())
	if err != nil {
		return err
	}
	p.SetReaders(rs, spec.Epoch)
	return nil
}

// WriteOrder writes the predicted paths of epoch e of the reader named
// reader ("" is the first one), one per line relative to the mount root,
// at most limit lines when limit > 0 (GET /v1/order?epoch=E&limit=N).
func (p *Prefetcher) WriteOrder(w io.Writer, reader string, e, limit int) error {
	var o Order
	for i, r := range p.Readers() {
		if r.Name == reader || reader == "" && i == 0 {
			o = r.Order
			break
		}
	}
	if o == nil {
		return fmt.Errorf("no reader %q", reader)
	}
	return WriteOrder(w, p.layout, o, e, limit)
}
