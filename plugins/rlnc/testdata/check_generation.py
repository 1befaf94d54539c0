#!/usr/bin/python3
"""Recomputes a captured CODED IP generation with the table-driven field of
gf256.py, apart from linerate's Go code.

Input (JSON, path in argv[1]):
  {"k": K, "n": N, "originals": [hex frame, ...],  # Ethernet/IPv6/UDP, in session order
   "coded": [hex frame, ...]}                       # Ethernet/IPv6/CODED IP packets of generation 0

For every coded packet it checks the header (Next Header 253, version 1,
field 0, K, N, Payload Length) and that the coded block is sum c_i * block_i,
where block_i = length (2 octets) || bytes after the IPv6 header || zero padding,
built here from the original packets. Prints one line per packet; exits 1 on
the first mismatch.
"""

import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gf256  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    gf256.check_known()
    cap = json.load(open(sys.argv[1]))
    k, n = cap["k"], cap["n"]
    blocks = []
    for h in cap["originals"][:k]:
        f = bytes.fromhex(h)
        if struct.unpack("!H", f[12:14])[0] != 0x86DD or f[14] >> 4 != 6:
            fail("original is not Ethernet/IPv6")
        plen = struct.unpack("!H", f[18:20])[0]
        upper = f[54:54 + plen]
        b = struct.pack("!H", len(upper)) + upper
        if len(b) > n:
            fail("original longer than N - 2")
        blocks.append(b + bytes(n - len(b)))
    checked = 0
    for h in cap["coded"]:
        f = bytes.fromhex(h)
        plen, nh = struct.unpack("!HB", f[18:21])
        if nh != 253:
            fail("Next Header %d, want 253" % nh)
        c = f[54:]
        if len(c) != plen:
            fail("IPv6 Payload Length %d, CODED IP part %d" % (plen, len(c)))
        (onh, sid, slen, gid, kk, verfield, blen, flags, used) = struct.unpack("!BBHHBBHBB", c[:12])
        if kk != k or blen != n or verfield != 0x10 or onh != 17:
            fail("header K=%d N=%d ver/field=%#x NH=%d" % (kk, blen, verfield, onh))
        if len(c) != 12 + k + n:
            fail("length %d, want 12+K+N = %d" % (len(c), 12 + k + n))
        vec = list(c[12:12 + k])
        block = c[12 + k:]
        used = used or k
        if any(vec[used:]):
            fail("coefficient beyond k' = %d" % used)
        if flags & 0x80:
            if sorted(vec) != [0] * (k - 1) + [1]:
                fail("systematic packet with vector %s" % vec)
        want = gf256.combine(vec[:used], blocks[:used])
        if block != want:
            fail("coded block differs for vector %s:\n got %s\nwant %s" % (bytes(vec).hex(), block.hex(), want.hex()))
        checked += 1
    print("ok: %d coded packets of generation %d recomputed (K=%d, N=%d)" % (checked, gid, k, n))


if __name__ == "__main__":
    main()
