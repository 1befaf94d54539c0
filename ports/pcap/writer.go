package pcap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// DefaultSnaplen is the snaplen of written files: tcpdump's and Wireshark's.
const DefaultSnaplen = 262144

const writeBufSize = 512 << 10

// writer writes a classic pcap stream with nanosecond timestamps (magic
// 0xa1b23c4d, little-endian) and link type Ethernet.
type writer struct {
	bw      *bufio.Writer
	snaplen int
	hdr     [pcapRecHdrLen]byte
}

func newWriter(w io.Writer, snaplen int) (*writer, error) {
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	wr := &writer{bw: bufio.NewWriterSize(w, writeBufSize), snaplen: snaplen}
	var h [pcapHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], magicNanos)
	le.PutUint16(h[4:], 2) // version 2.4
	le.PutUint16(h[6:], 4)
	// thiszone and sigfigs stay 0
	le.PutUint32(h[16:], uint32(snaplen))
	le.PutUint32(h[20:], linkTypeEther)
	if _, err := wr.bw.Write(h[:]); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return wr, nil
}

// write appends one record stamped with Unix ns ts. Data beyond the snaplen is
// cut; the record keeps the original length.
func (w *writer) write(data []byte, ts int64) error {
	orig := len(data)
	if len(data) > w.snaplen {
		data = data[:w.snaplen]
	}
	sec, ns := ts/1e9, ts%1e9
	if ns < 0 { // before 1970: borrow a second so the fraction stays positive
		sec, ns = sec-1, ns+1e9
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:], uint32(sec))
	le.PutUint32(w.hdr[4:], uint32(ns))
	le.PutUint32(w.hdr[8:], uint32(len(data)))
	le.PutUint32(w.hdr[12:], uint32(orig))
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return err
	}
	_, err := w.bw.Write(data)
	return err
}

func (w *writer) flush() error { return w.bw.Flush() }
