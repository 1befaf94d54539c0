#!/usr/bin/python3
"""Golden vectors for the IOAM options tshark 4.0 cannot decode: Proof of
Transit (RFC 9197 §4.5, draft-ietf-sfc-proof-of-transit), edge-to-edge
(RFC 9197 §4.6) and Direct Exporting (RFC 9326 §3.2), each inside its IPv6
option (RFC 9486 §4.1) and options header in the Linux kernel's layout (a
2-byte PadN first so the option is 4n-aligned, padding to 8 bytes last).

Built from the RFC figures with struct, independently of the Go code, and
checked in with the JSON it writes:

    /usr/bin/python3 golden.py > golden.json
"""
import json
import random
import struct

OPT_CHANGING = 0x31  # data may change en route: traces, POT
OPT_STATIC = 0x11    # E2E, DEX
TYPE_POT, TYPE_E2E, TYPE_DEX = 2, 3, 4


def option(opt_type, ioam_type, body):
    # Option Type, Opt Data Len, Reserved, IOAM Option-Type, Option Data.
    return struct.pack("!BBBB", opt_type, 2 + len(body), 0, ioam_type) + body


def pad(n):
    if n == 0:
        return b""
    if n == 1:
        return b"\x00"
    return struct.pack("!BB", 1, n - 2) + b"\x00" * (n - 2)


def options_header(next_header, opts):
    body = pad(2) + opts
    total = (2 + len(body) + 7) // 8 * 8
    body += pad(total - 2 - len(body))
    return struct.pack("!BB", next_header, total // 8 - 1) + body


def pot_body(ns, rnd, cml):
    # Namespace-ID, POT Type 0, flags, Random (PktID), Cumulative.
    return struct.pack("!HBBQQ", ns, 0, 0, rnd, cml)


def e2e_body(ns, e2e_type, seq64, seq32, sec, frac):
    b = struct.pack("!HH", ns, e2e_type)
    if e2e_type & 0x8000:
        b += struct.pack("!Q", seq64)
    if e2e_type & 0x4000:
        b += struct.pack("!I", seq32)
    if e2e_type & 0x2000:
        b += struct.pack("!I", sec)
    if e2e_type & 0x1000:
        b += struct.pack("!I", frac)
    return b


def dex_body(ns, ext, trace_type, flow, seq):
    b = struct.pack("!HBB", ns, 0, ext) + struct.pack("!I", trace_type << 8)
    if ext & 0x80:
        b += struct.pack("!I", flow)
    if ext & 0x40:
        b += struct.pack("!I", seq)
    return b


def pot_vectors(rng):
    # Shamir secret sharing over GF(p): POLY-1 secret, POLY-2 public with the
    # per-packet random number as its constant term; k+1 = 4 nodes.
    p = 2**64 - 59
    n = 4
    poly1 = [rng.randrange(p) for _ in range(n)]
    poly2 = [0] + [rng.randrange(p) for _ in range(n - 1)]
    xs = []
    while len(xs) < n:
        x = rng.randrange(1, p)
        if x not in xs:
            xs.append(x)

    def ev(c, x):
        return sum(ci * pow(x, i, p) for i, ci in enumerate(c)) % p

    nodes = []
    for i, x in enumerate(xs):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if j != i:
                num = num * xj % p
                den = den * (xj - x) % p
        lpc = num * pow(den, p - 2, p) % p
        nodes.append({"x": hex(x), "share": hex(ev(poly1, x)), "public_share": hex(ev(poly2, x)), "lpc": hex(lpc)})
    packets = []
    for _ in range(4):
        rnd = rng.randrange(p)
        cml, steps = 0, []
        for nd in nodes:
            t = (int(nd["share"], 16) + int(nd["public_share"], 16) + rnd) % p
            cml = (cml + t * int(nd["lpc"], 16)) % p
            steps.append(hex(cml))
        assert cml == (poly1[0] + rnd) % p
        skipped = 0
        for k, nd in enumerate(nodes):
            if k == 2:
                continue
            t = (int(nd["share"], 16) + int(nd["public_share"], 16) + rnd) % p
            skipped = (skipped + t * int(nd["lpc"], 16)) % p
        opt = option(OPT_CHANGING, TYPE_POT, pot_body(123, rnd, cml))
        packets.append({"random": hex(rnd), "cumulative": steps, "skipped_node_2": hex(skipped),
                        "skipped_verifies": skipped == (poly1[0] + rnd) % p,
                        "option": opt.hex(), "header": options_header(41, opt).hex()})
    return {"prime": hex(p), "secret": hex(poly1[0]), "nodes": nodes, "packets": packets}


def e2e_vectors():
    out = []
    for ns, t, s64, s32, sec, frac in [
        (123, 0xF000, 0x0102030405060708, 0x0A0B0C0D, 1700000000, 999999),
        (0, 0x8000, 1, 0, 0, 0),
        (7, 0x4000, 0, 0xFFFFFFFF, 0, 0),
        (0xFFFF, 0x3000, 0, 0, 0x65920081, 0x80000000),
        (42, 0xC000, 2**64 - 1, 17, 0, 0),
        # What an encapsulating node writes for its sixth packet (sequence 5)
        # at 1700000000.5 s, POSIX format: both counters are the same one.
        (123, 0xF000, 5, 5, 1700000000, 500000),
    ]:
        opt = option(OPT_STATIC, TYPE_E2E, e2e_body(ns, t, s64, s32, sec, frac))
        out.append({"namespace": ns, "type": t, "seq64": str(s64), "seq32": s32, "seconds": sec, "fraction": frac,
                    "option": opt.hex(), "header": options_header(41, opt).hex()})
    return out


def dex_vectors():
    out = []
    for ns, ext, tt, flow, seq in [
        (123, 0xC0, 0xF00000, 42, 7),
        (1, 0x80, 0xC00000, 0xDEADBEEF, 0),
        (2, 0x40, 0x800000, 0, 0xFFFFFFFF),
        (3, 0x00, 0xFFF002, 0, 0),
    ]:
        opt = option(OPT_STATIC, TYPE_DEX, dex_body(ns, ext, tt, flow, seq))
        out.append({"namespace": ns, "extension_flags": ext, "trace_type": tt, "flow_id": flow, "sequence": seq,
                    "option": opt.hex(), "header": options_header(41, opt).hex()})
    return out


def main():
    rng = random.Random(20221115)  # RFC 9326's publication date
    print(json.dumps({"pot": pot_vectors(rng), "e2e": e2e_vectors(), "dex": dex_vectors()}, indent=1))


if __name__ == "__main__":
    main()
