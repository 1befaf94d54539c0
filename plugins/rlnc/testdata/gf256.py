#!/usr/bin/python3
"""GF(2^8) over x^8+x^4+x^3+x^2+1 (0x11D), table-driven, written apart from
linerate's Go package gf so the tests can check one against the other.

Used as a module by check_generation.py and wire_example.py, and runnable
alone to check the tables against values published by other libraries.
"""

POLY = 0x11D

EXP = [0] * 512
LOG = [0] * 256
_x = 1
for _i in range(255):
    EXP[_i] = _x
    LOG[_x] = _i
    _x <<= 1
    if _x & 0x100:
        _x ^= POLY
for _i in range(255, 512):
    EXP[_i] = EXP[_i - 255]


def mul(a, b):
    if a == 0 or b == 0:
        return 0
    return EXP[LOG[a] + LOG[b]]


def inv(a):
    if a == 0:
        raise ZeroDivisionError("inverse of 0 in GF(2^8)")
    return EXP[255 - LOG[a]]


def combine(coeffs, blocks):
    """sum_i coeffs[i] * blocks[i], byte by byte (addition is XOR)."""
    n = len(blocks[0])
    out = bytearray(n)
    for c, b in zip(coeffs, blocks):
        if c == 0:
            continue
        for x in range(n):
            out[x] ^= mul(c, b[x])
    return bytes(out)


# Products published by other implementations of the same field:
#  - Backblaze JavaReedSolomon / klauspost/reedsolomon galois tests:
#    3*4 = 12, 7*7 = 21, 23*45 = 41, and 25 times a row of values;
#  - Intel ISA-L and Jerasure (w=8, the default polynomial 0435 octal = 0x11D):
#    2*0x80 = 0x1D, the inverse of 2 is 0x8E.
KNOWN = [(3, 4, 12), (7, 7, 21), (23, 45, 41), (2, 0x80, 0x1D), (2, 0x8E, 1)]
ROW_IN = [0, 1, 2, 3, 4, 5, 6, 10, 50, 100, 150, 174, 201, 255, 99, 32, 67, 85]
ROW_25 = [0x0, 0x19, 0x32, 0x2b, 0x64, 0x7d, 0x56, 0xfa, 0xb8, 0x6d, 0xc7, 0x85, 0xc3, 0x1f, 0x22, 0x7, 0x25, 0xfe]


def check_known():
    for a, b, want in KNOWN:
        got = mul(a, b)
        if got != want:
            raise AssertionError("%d*%d = %d, want %d" % (a, b, got, want))
    got = [mul(25, v) for v in ROW_IN]
    if got != ROW_25:
        raise AssertionError("25*row = %s, want %s" % (got, ROW_25))
    if inv(2) != 0x8E:
        raise AssertionError("inv(2) = %#x" % inv(2))
    for a in range(1, 256):
        if mul(a, inv(a)) != 1:
            raise AssertionError("a*inv(a) != 1 for %d" % a)


if __name__ == "__main__":
    check_known()
    print("gf256: known products ok")
