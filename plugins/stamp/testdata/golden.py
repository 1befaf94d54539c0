#!/usr/bin/python3
"""Golden vectors for STAMP test packets, built from the figures of RFC 8762
(§4.2.1, §4.2.2, §4.3.1, §4.3.2), RFC 8972 (§3 SSID, §4 TLVs) and RFC 9503
(§3, §4) with struct and hmac, independently of the Go code. Scapy 2.5 knows
only the unauthenticated packets and no TLV types, so these cover the rest:
authenticated mode, PTP timestamps, every TLV and the HMAC TLV.

    /usr/bin/python3 golden.py > golden.json
"""
import hashlib
import hmac
import ipaddress
import json
import math
import struct
from fractions import Fraction

NTP_EPOCH = 2208988800  # 1900-01-01 to 1970-01-01
KEY = bytes(range(1, 33))  # the vectors' HMAC key, 32 octets

U, M, I = 0x80, 0x40, 0x20


def ntp(unix_ns):
    sec, ns = divmod(unix_ns, 10**9)
    return (sec + NTP_EPOCH) << 32 | (ns << 32) // 10**9


def ptp(tai_ns):
    sec, ns = divmod(tai_ns, 10**9)
    return sec << 32 | ns


def err_est(s, z, scale, mult):
    return (s << 15) | (z << 14) | (scale << 8) | mult


def err_est_for(err_ns):
    """Smallest Scale whose Multiplier, rounded up, fits 8 bits (RFC 4656
    §4.1.2: error = Multiplier * 2^(Scale-32) s)."""
    if err_ns <= 0:
        return 0, 1
    for scale in range(64):
        m = math.ceil(Fraction(err_ns, 10**9) * 2**32 / 2**scale)
        if m <= 255:
            return scale, max(m, 1)
    return 63, 255


def mac(data):
    return hmac.new(KEY, data, hashlib.sha256).digest()[:16]


def tlv(flags, typ, value):
    return struct.pack("!BBH", flags, typ, len(value)) + value


def sender_unauth(seq, ts, ee, ssid):
    # Sequence Number, Timestamp, Error Estimate, SSID, MBZ (28 octets).
    return struct.pack("!IQHH", seq, ts, ee, ssid) + bytes(28)


def sender_auth(seq, ts, ee, ssid):
    # Sequence Number, MBZ (12), Timestamp, Error Estimate, SSID, MBZ (68), HMAC.
    body = struct.pack("!I", seq) + bytes(12) + struct.pack("!QHH", ts, ee, ssid) + bytes(68)
    assert len(body) == 96
    return body + mac(body)


def reflector_unauth(seq, ts, ee, ssid, rx, sseq, sts, see, ttl):
    # ... Receive Timestamp, Sender Sequence Number, Sender Timestamp, Sender
    # Error Estimate, MBZ (2), Ses-Sender TTL, MBZ (3).
    return struct.pack("!IQHHQIQHHB", seq, ts, ee, ssid, rx, sseq, sts, see, 0, ttl) + bytes(3)


def reflector_auth(seq, ts, ee, ssid, rx, sseq, sts, see, ttl):
    body = (struct.pack("!I", seq) + bytes(12) + struct.pack("!QHH", ts, ee, ssid) + bytes(4) +
            struct.pack("!Q", rx) + bytes(8) + struct.pack("!I", sseq) + bytes(12) +
            struct.pack("!QH", sts, see) + bytes(6) + struct.pack("!B", ttl) + bytes(15))
    assert len(body) == 96
    return body + mac(body)


def v6(a):
    return ipaddress.IPv6Address(a).packed


T1 = 1700000000 * 10**9 + 500_000_000   # Unix ns
T2 = T1 + 1_234_567
T3 = T2 + 20_000
TAI = 37 * 10**9

out = {"key": KEY.hex(), "packets": [], "error_estimates": [], "tlvs": {}}


def add(name, role, auth, pkt, **fields):
    out["packets"].append(dict(name=name, role=role, auth=auth, hex=pkt.hex(), **fields))


ee_ntp = err_est(1, 0, 0, 1)
ee_ptp = err_est(0, 1, 10, 200)
add("sender_ntp", "sender", False, sender_unauth(1, ntp(T1), ee_ntp, 0x1234),
    seq=1, ts=ntp(T1), unix_ns=T1, ee=ee_ntp, ssid=0x1234)
add("sender_ptp", "sender", False, sender_unauth(2, ptp(T1 + TAI), ee_ptp, 7),
    seq=2, ts=ptp(T1 + TAI), unix_ns=T1, ee=ee_ptp, ssid=7)
add("sender_auth", "sender", True, sender_auth(3, ntp(T1), ee_ntp, 0xBEEF),
    seq=3, ts=ntp(T1), unix_ns=T1, ee=ee_ntp, ssid=0xBEEF)
add("reflector_ntp", "reflector", False,
    reflector_unauth(10, ntp(T3), ee_ntp, 0x1234, ntp(T2), 1, ntp(T1), ee_ntp, 63),
    seq=10, ts=ntp(T3), ee=ee_ntp, ssid=0x1234, rx=ntp(T2), sseq=1, sts=ntp(T1), see=ee_ntp, ttl=63)
add("reflector_auth", "reflector", True,
    reflector_auth(11, ptp(T3 + TAI), ee_ptp, 0xBEEF, ptp(T2 + TAI), 3, ntp(T1), ee_ntp, 255),
    seq=11, ts=ptp(T3 + TAI), ee=ee_ptp, ssid=0xBEEF, rx=ptp(T2 + TAI), sseq=3, sts=ntp(T1), see=ee_ntp, ttl=255)

for ns in [0, 1, 233, 1000, 999_999, 1_000_000, 123_456_789, 10**9, 3 * 10**9 + 7]:
    s, m = err_est_for(ns)
    out["error_estimates"].append(dict(error_ns=ns, scale=s, multiplier=m))

# One value of every TLV a sender sends (U set, RFC 8972 §4), then the HMAC
# TLV over the Sequence Number and the TLVs before it (RFC 8972 §4.8).
seg1, seg2 = "2001:db8:e::1", "2001:db8:a::2"
tl = {
    "extra_padding": tlv(U, 1, bytes(12)),
    "location": tlv(U, 2, struct.pack("!HH", 0, 0) + tlv(0, 1, bytes(8)) + tlv(0, 4, bytes(16)) + tlv(0, 7, bytes(16))),
    "timestamp_info": tlv(U, 3, bytes(4)),
    # DSCP1 46 (EF), DSCP2 0, ECN 0, RP 0, Reserved.
    "class_of_service": tlv(U, 4, struct.pack("!I", 46 << 26)),
    "direct_measurement": tlv(U, 5, struct.pack("!III", 5, 0, 0)),
    # Access ID 1 (3GPP) in the high nibble, Return Code 1 (available).
    "access_report": tlv(U, 6, struct.pack("!BBH", 1 << 4, 1, 0)),
    "follow_up_telemetry": tlv(U, 7, bytes(16)),
    "destination_node_address": tlv(U, 9, v6("2001:db8:b::2")),
    "return_path": tlv(U, 10, tlv(0, 4, v6(seg1) + v6(seg2))),
}
out["tlvs"] = {k: v.hex() for k, v in tl.items()}
area = b"".join(tl[k] for k in ["location", "timestamp_info", "class_of_service", "direct_measurement",
                                 "access_report", "follow_up_telemetry", "destination_node_address", "return_path"])
base = sender_unauth(42, ntp(T1), ee_ntp, 0x1234)
hm = mac(struct.pack("!I", 42) + area)
pkt = base + area + tlv(U, 8, hm) + tl["extra_padding"]
add("sender_tlvs_hmac", "sender", False, pkt, seq=42, ts=ntp(T1), ee=ee_ntp, ssid=0x1234, tlv_hmac=hm.hex())

json.dump(out, __import__("sys").stdout, indent=1)
print()
