package ioam

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/BurntSushi/toml"
)

// Proof of Transit, POT type 0 (draft-ietf-sfc-proof-of-transit §4): Shamir
// secret sharing over GF(p). A secret polynomial POLY-1 of degree k has its
// constant term as the SECRET; each of the k+1 nodes of a path holds one point
// (x_i, y_i = POLY-1(x_i)) and the Lagrange constant LPC_i of x_i. Per packet
// the encapsulating node draws RND, the constant term of a public polynomial
// POLY-2 whose other terms are fixed; node i knows POLY-2(x_i) − RND. Each node
// adds (y_i + POLY-2(x_i)) × LPC_i to the cumulative value, so after the last
// node it is POLY-1(0) + POLY-2(0) = SECRET + RND (mod p), which only a packet
// that crossed every node carries. The verifier, the last node, checks it.

// POTKey is one node's share of a POT profile. It is secret: it comes from a
// key file of mode 0600 and is never printed.
type POTKey struct {
	Prime       uint64 // p, a prime below 2^64
	X           uint64 // the node's point (informational: LPC already encodes it)
	Share       uint64 // y_i = POLY-1(x_i)
	PublicShare uint64 // POLY-2(x_i) − RND
	LPC         uint64 // Lagrange basis polynomial of x_i at 0
	Secret      uint64 // POLY-1(0); the verifier's only
	Verifier    bool
}

// String hides the key material.
func (k *POTKey) String() string { return "POTKey{…}" }

// mulmod is a×b mod p for a, b < p.
func mulmod(a, b, p uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi, lo, p)
	return r
}

// addmod is a+b mod p for a, b < p.
func addmod(a, b, p uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 || s >= p {
		s -= p
	}
	return s
}

// Update is this node's step: the cumulative value after it.
func (k *POTKey) Update(random, cumulative uint64) uint64 {
	p := k.Prime
	random %= p
	cumulative %= p
	t := addmod(addmod(k.Share, k.PublicShare, p), random, p)
	return addmod(cumulative, mulmod(t, k.LPC, p), p)
}

// Verify reports whether a cumulative value that every node updated, this one
// included, proves the path: it equals SECRET + RND (mod p).
func (k *POTKey) Verify(random, cumulative uint64) bool {
	p := k.Prime
	return cumulative%p == addmod(k.Secret, random%p, p)
}

// Random draws a per-packet random number below p.
func (k *POTKey) Random(r *rand.Rand) uint64 {
	return r.Uint64N(k.Prime)
}

// potKeyFile is a key file's TOML. Values above 2^63 do not fit a TOML
// integer, so every value is a string: decimal or 0x-hex.
type potKeyFile struct {
	Prime       string `toml:"prime"`
	X           string `toml:"x"`
	Share       string `toml:"share"`
	PublicShare string `toml:"public_share"`
	LPC         string `toml:"lpc"`
	Secret      string `toml:"secret"`
}

// LoadPOTKey reads a key file. It refuses a file others may read, and its
// errors never quote the key material.
func LoadPOTKey(path string) (*POTKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("POT key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("POT key file %s: mode %04o lets others read it; chmod 600", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("POT key file: %w", err)
	}
	var f potKeyFile
	md, err := toml.Decode(string(b), &f)
	if err != nil {
		return nil, fmt.Errorf("POT key file %s: not valid TOML", path)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("POT key file %s: unknown key %q", path, u[0].String())
	}
	k := &POTKey{}
	fields := []struct {
		name string
		s    string
		v    *uint64
		need bool
	}{
		{"prime", f.Prime, &k.Prime, true},
		{"x", f.X, &k.X, false},
		{"share", f.Share, &k.Share, true},
		{"public_share", f.PublicShare, &k.PublicShare, true},
		{"lpc", f.LPC, &k.LPC, true},
		{"secret", f.Secret, &k.Secret, false},
	}
	for _, fl := range fields {
		if fl.s == "" {
			if fl.need {
				return nil, fmt.Errorf("POT key file %s: %s is missing", path, fl.name)
			}
			continue
		}
		v, err := strconv.ParseUint(fl.s, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("POT key file %s: %s is not a 64-bit number", path, fl.name)
		}
		*fl.v = v
	}
	k.Verifier = f.Secret != ""
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("POT key file %s: %w", path, err)
	}
	return k, nil
}

func (k *POTKey) check() error {
	if k.Prime < 3 || !isPrime(k.Prime) {
		return errors.New("prime is not a prime")
	}
	if k.Share >= k.Prime || k.PublicShare >= k.Prime || k.LPC >= k.Prime || k.Secret >= k.Prime {
		return errors.New("a value is not below the prime")
	}
	return nil
}

// isPrime is a deterministic Miller–Rabin test for 64-bit n.
func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	for _, p := range []uint64{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37} {
		if n%p == 0 {
			return n == p
		}
	}
	d, s := n-1, 0
	for d%2 == 0 {
		d /= 2
		s++
	}
	for _, a := range []uint64{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37} {
		x := powmod(a, d, n)
		if x == 1 || x == n-1 {
			continue
		}
		composite := true
		for i := 1; i < s; i++ {
			x = mulmod(x, x, n)
			if x == n-1 {
				composite = false
				break
			}
		}
		if composite {
			return false
		}
	}
	return true
}

func powmod(a, e, p uint64) uint64 {
	r := uint64(1)
	a %= p
	for e > 0 {
		if e&1 != 0 {
			r = mulmod(r, a, p)
		}
		a = mulmod(a, a, p)
		e >>= 1
	}
	return r
}

// DealPOT makes the shares of a path of n nodes (n ≥ 2) over prime p: a
// random secret polynomial of degree n−1 and public polynomial, each node's
// point, share and Lagrange constant. The last key is the verifier's. It is
// for tests, the lab and operators' tooling, not the datapath.
func DealPOT(n int, p uint64, r *rand.Rand) ([]POTKey, error) {
	if n < 2 {
		return nil, errors.New("POT: a path needs at least two nodes")
	}
	if p < 3 || !isPrime(p) {
		return nil, errors.New("POT: the modulus is not an odd prime")
	}
	if uint64(n) >= p {
		return nil, errors.New("POT: more nodes than the modulus has points")
	}
	poly1 := make([]uint64, n) // poly1[0] is the secret
	poly2 := make([]uint64, n) // poly2[0] is RND, drawn per packet: left 0
	for i := range poly1 {
		poly1[i] = r.Uint64N(p)
		if i > 0 {
			poly2[i] = r.Uint64N(p)
		}
	}
	xs := make([]uint64, n)
	seen := map[uint64]bool{0: true}
	for i := range xs {
		for {
			x := r.Uint64N(p)
			if !seen[x] {
				seen[x] = true
				xs[i] = x
				break
			}
		}
	}
	eval := func(c []uint64, x uint64) uint64 {
		v := uint64(0)
		for i := len(c) - 1; i >= 0; i-- {
			v = addmod(mulmod(v, x, p), c[i], p)
		}
		return v
	}
	keys := make([]POTKey, n)
	for i, x := range xs {
		// LPC_i = Π_{j≠i} x_j / (x_j − x_i)
		num, den := uint64(1), uint64(1)
		for j, xj := range xs {
			if j == i {
				continue
			}
			num = mulmod(num, xj, p)
			den = mulmod(den, addmod(xj, p-x, p), p)
		}
		lpc := mulmod(num, powmod(den, p-2, p), p)
		keys[i] = POTKey{Prime: p, X: x, Share: eval(poly1, x), PublicShare: eval(poly2, x), LPC: lpc}
	}
	keys[n-1].Secret = poly1[0]
	keys[n-1].Verifier = true
	return keys, nil
}

// WritePOTKey writes k as a new key file of mode 0600. It never replaces a
// file: one that exists could keep a mode that lets others read the key.
func WritePOTKey(path string, k *POTKey) error {
	s := fmt.Sprintf("# linerate POT key: secret, keep mode 0600\nprime = %q\nx = %q\nshare = %q\npublic_share = %q\nlpc = %q\n",
		hex64(k.Prime), hex64(k.X), hex64(k.Share), hex64(k.PublicShare), hex64(k.LPC))
	if k.Verifier {
		s += fmt.Sprintf("secret = %q\n", hex64(k.Secret))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("POT key file: %w", err)
	}
	// The umask may have taken bits away, never added any: 0600 is exact.
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return fmt.Errorf("POT key file %s: %w", path, err)
	}
	return f.Close()
}

func hex64(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// potKeys maps namespaces to POT keys, the first key where a namespace has
// several.
type potKeys struct {
	ids  []uint16
	keys []*POTKey
	idx  idIndex
}

func (k *potKeys) add(ns uint16, key *POTKey) {
	k.ids = append(k.ids, ns)
	k.keys = append(k.keys, key)
	k.idx.add(k.ids)
}

func (k *potKeys) lookup(ns uint16) *POTKey {
	if i := k.idx.find(k.ids, ns); i >= 0 {
		return k.keys[i]
	}
	return nil
}
