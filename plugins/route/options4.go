package route

// IPv4 options (RFC 791 §3.1).
const (
	opt4End  = 0   // End of Option List: the rest is padding
	opt4NOP  = 1   // No Operation: one byte
	opt4LSRR = 131 // Loose Source and Record Route
	opt4SSRR = 137 // Strict Source and Record Route
)

// options4 walks IPv4 options: End of Option List ends them, No Operation is
// one byte, and every other option is its type, its length (of the whole
// option, at least 2) and its data.
type options4 struct {
	b   []byte
	off int
	bad bool // an option's length is under 2 or runs past the options
}

// next returns the next option other than a No Operation, whole: false at
// the end, End of Option List included, and at a malformed option (bad).
func (it *options4) next() ([]byte, bool) {
	for it.off < len(it.b) {
		switch it.b[it.off] {
		case opt4End:
			it.off = len(it.b)
			return nil, false
		case opt4NOP:
			it.off++
			continue
		}
		rest := it.b[it.off:]
		if len(rest) < 2 || rest[1] < 2 || int(rest[1]) > len(rest) {
			it.bad, it.off = true, len(it.b)
			return nil, false
		}
		o := rest[:rest[1]]
		it.off += len(o)
		return o, true
	}
	return nil, false
}

// sourceRoute4 reports whether IPv4 options hold a loose or strict source
// route anywhere; ok is false when they cannot be walked, and then nobody
// can tell what a host or router down the path will read in them.
func sourceRoute4(opts []byte) (srr, ok bool) {
	it := options4{b: opts}
	for o, more := it.next(); more; o, more = it.next() {
		srr = srr || o[0] == opt4LSRR || o[0] == opt4SSRR
	}
	return srr, !it.bad
}
