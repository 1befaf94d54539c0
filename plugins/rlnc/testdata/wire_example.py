#!/usr/bin/python3
"""Builds the worked example of docs/rlnc-wire.md from first principles
(struct, and the table-driven field of gf256.py), and prints it in hex."""

import struct
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gf256  # noqa: E402

SRC = bytes.fromhex("20010db8000100000000000000000001")
DST = bytes.fromhex("20010db8000200000000000000000001")
K, N, SESSION, GEN = 3, 12, 7, 5
COEF = [0x02, 0x03, 0x8E]
PAYLOADS = [b"hi", b"ok", b"!"]


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp(payload):
    ln = 8 + len(payload)
    pseudo = SRC + DST + struct.pack("!IxxxB", ln, 17)
    hdr = struct.pack("!HHHH", 10000, 20000, ln, 0)
    c = csum(pseudo + hdr + payload) or 0xFFFF
    return struct.pack("!HHHH", 10000, 20000, ln, c) + payload


def ipv6(nh, payload_len):
    return struct.pack("!IHBB", 6 << 28, payload_len, nh, 64) + SRC + DST


def block(upper):
    b = struct.pack("!H", len(upper)) + upper
    return b + bytes(N - len(b))


def coded_header(flags, kk, vec):
    return struct.pack("!BBHHBBHBB", 17, SESSION, 0, GEN, K, 0x10, N, flags, kk) + bytes(vec)


def main():
    uppers = [udp(p) for p in PAYLOADS]
    blocks = [block(u) for u in uppers]
    coded = gf256.combine(COEF, blocks)
    ch = coded_header(0, 0, COEF)
    pkt = ipv6(253, len(ch) + N) + ch + coded
    sysh = coded_header(0x80, 0, [0, 1, 0])
    sys_pkt = ipv6(253, len(sysh) + N) + sysh + blocks[1]
    for i, u in enumerate(uppers):
        print("original %d: %s" % (i, (ipv6(17, len(u)) + u).hex()))
        print("block %d:    %s" % (i, blocks[i].hex()))
    print("coded:      %s" % pkt.hex())
    print("coded block: %s" % coded.hex())
    print("systematic: %s" % sys_pkt.hex())
    # Products behind the first coded octet, for the text.
    for i in range(K):
        print("c%d*b%d[0..2]: %s" % (i, i, bytes(gf256.mul(COEF[i], x) for x in blocks[i][:3]).hex()))


if __name__ == "__main__":
    main()
