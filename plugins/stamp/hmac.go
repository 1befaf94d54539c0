package stamp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MinKeyLen is the shortest HMAC key accepted: 128 bits, the truncated MAC's
// strength.
const MinKeyLen = 16

// maxKeyFile bounds what a key file may hold.
const maxKeyFile = 4096

// Key is an HMAC-SHA-256 key for authenticated mode and the HMAC TLV (RFC
// 8762 §4.4, RFC 8972 §4.8). Its bytes never leave the process: String and
// errors name the file, never the content.
type Key struct {
	name string
	b    []byte
}

// Errors of key loading.
var (
	ErrKeyMode  = errors.New("key file must not be accessible by group or others (chmod 600)")
	ErrKeyShort = fmt.Errorf("key shorter than %d bytes", MinKeyLen)
)

// LoadKey reads a key file: hex digits (whitespace ignored) are decoded,
// anything else is the key's raw bytes. The file must be a regular file with
// no permission for group or others: it is checked on the open descriptor, so
// nothing swaps it between the check and the read.
func LoadKey(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s: not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s (mode %04o): %w", path, st.Mode().Perm(), ErrKeyMode)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: longer than %d bytes", path, maxKeyFile)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	k.name = path
	return k, nil
}

// LoadKeyNamed reads key name from directory dir, for keys the control API
// names: a name is a file name, never a path.
func LoadKeyNamed(dir, name string) (*Key, error) {
	if dir == "" {
		return nil, errors.New("no key_dir is configured: the control API can name keys only from it")
	}
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("key name %q: a plain file name in key_dir is required", name)
	}
	return LoadKey(filepath.Join(dir, name))
}

// ParseKey makes a key from a key file's content.
func ParseKey(b []byte) (*Key, error) {
	s := strings.Join(strings.Fields(string(b)), "")
	var key []byte
	if d, err := hex.DecodeString(s); err == nil && len(s) > 0 {
		key = d
	} else {
		key = append([]byte(nil), b...)
	}
	if len(key) < MinKeyLen {
		return nil, ErrKeyShort
	}
	return &Key{name: "inline", b: key}, nil
}

// NewKey makes a key from raw bytes (tests, benchmarks).
func NewKey(b []byte) (*Key, error) {
	if len(b) < MinKeyLen {
		return nil, ErrKeyShort
	}
	return &Key{name: "inline", b: append([]byte(nil), b...)}, nil
}

// String names the key without its bytes.
func (k *Key) String() string { return "key " + k.name }

// GoString redacts the key in %#v.
func (k *Key) GoString() string { return k.String() }

// Name is where the key came from.
func (k *Key) Name() string { return k.name }

// mac is one lcore's HMAC state for a key: hash.Hash is stateful, so every
// lcore that signs or verifies for a session has its own.
type mac struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

func (k *Key) newMAC() *mac {
	return &mac{h: hmac.New(sha256.New, k.b)}
}

// sum16 computes HMAC-SHA-256 over a and then b, truncated to 16 octets, into
// m.sum[:16]. Inputs are packet memory: nothing escapes, nothing allocates.
func (m *mac) sum16(a, b []byte) []byte {
	m.h.Reset()
	m.h.Write(a)
	if len(b) > 0 {
		m.h.Write(b)
	}
	m.h.Sum(m.sum[:0])
	return m.sum[:HMACLen]
}

// verify checks a 16-octet HMAC in constant time.
func (m *mac) verify(got, a, b []byte) bool {
	return hmac.Equal(m.sum16(a, b), got)
}

// SignBase writes the HMAC of an authenticated base packet p (octets 0–95)
// into its HMAC field, octets 96–111.
func (k *Key) SignBase(p []byte) error {
	if len(p) < BaseAuthLen {
		return ErrShort
	}
	m := k.newMAC()
	copy(p[HMACCovered:BaseAuthLen], m.sum16(p[:HMACCovered], nil))
	return nil
}

// VerifyBase checks an authenticated base packet's HMAC.
func (k *Key) VerifyBase(p []byte) bool {
	if len(p) < BaseAuthLen {
		return false
	}
	return k.newMAC().verify(p[HMACCovered:BaseAuthLen], p[:HMACCovered], nil)
}

// SignTLVs fills the HMAC TLV of packet p (a UDP payload whose base is baseLen
// octets) when its last TLV is one: the HMAC covers the Sequence Number and
// every TLV before the HMAC TLV (RFC 8972 §4.8). It reports whether it found
// one.
func (k *Key) SignTLVs(p []byte, baseLen int) (bool, error) {
	off, ok, err := hmacTLV(p, baseLen)
	if !ok || err != nil {
		return false, err
	}
	m := k.newMAC()
	copy(p[off+TLVHeaderLen:], m.sum16(p[:4], p[baseLen:off]))
	return true, nil
}

// VerifyTLVs checks the HMAC TLV of p. A packet without one verifies.
func (k *Key) VerifyTLVs(p []byte, baseLen int) (bool, error) {
	off, ok, err := hmacTLV(p, baseLen)
	if err != nil {
		return false, err
	}
	if !ok {
		return true, nil
	}
	m := k.newMAC()
	return m.verify(p[off+TLVHeaderLen:off+TLVHeaderLen+HMACLen], p[:4], p[baseLen:off]), nil
}

// hmacTLV finds the HMAC TLV of p: it must follow every TLV but Extra Padding
// (RFC 8972 §4.8).
func hmacTLV(p []byte, baseLen int) (off int, ok bool, err error) {
	if len(p) < baseLen {
		return 0, false, ErrShort
	}
	it := NewTLVIter(p[baseLen:])
	off = -1
	for t, more := it.Next(); more; t, more = it.Next() {
		switch {
		case t.Type() == TLVHMAC:
			if off >= 0 {
				return 0, false, ErrHMACNotLast
			}
			if t.Len() != HMACLen {
				return 0, false, ErrBadTLV
			}
			off = baseLen + it.Off()
		case off >= 0 && t.Type() != TLVExtraPadding:
			return 0, false, ErrHMACNotLast
		}
	}
	if it.Err() != nil {
		return 0, false, it.Err()
	}
	return off, off >= 0, nil
}
