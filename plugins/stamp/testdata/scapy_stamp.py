#!/usr/bin/python3
"""Scapy 2.5's STAMP layer (scapy.contrib.stamp) against linerate.

    scapy_stamp.py parse   < frames.json   reads linerate's frames (hex, one
                                           JSON object a line: role, hex) and
                                           prints what Scapy decodes
    scapy_stamp.py build N < spec.json     prints N Session-Sender test packets
                                           built by Scapy, as hex lines

Scapy binds the sender layout to UDP destination port 862 and the reflector
layout to source port 862, so the sender side uses another port.
"""
import json
import sys

from scapy.all import Ether, raw
from scapy.contrib.stamp import (ErrorEstimate, STAMPSessionReflectorTestUnauthenticated,
                                 STAMPSessionSenderTestUnauthenticated)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting


def ee(e):
    return {"S": int(e.S), "Z": int(e.Z), "scale": int(e.scale), "multiplier": int(e.multiplier)}


def parse(line):
    f = json.loads(line)
    pkt = Ether(bytes.fromhex(f["hex"]))
    out = {"role": f["role"]}
    if IPv6ExtHdrSegmentRouting in pkt:
        srh = pkt[IPv6ExtHdrSegmentRouting]
        out["segleft"] = int(srh.segleft)
        out["segments"] = [str(a) for a in srh.addresses]
    udp = pkt[UDP]
    out["udp_chksum_ok"] = udp.chksum == UDP(raw(udp)).chksum  # as received
    body = udp.payload
    if f["role"] == "sender":
        if not isinstance(body, STAMPSessionSenderTestUnauthenticated):
            body = STAMPSessionSenderTestUnauthenticated(raw(body), _parent=udp)
        s = body
        out.update(seq=s.seq, ts=s.getfieldval("ts"), ee=ee(s.err_estimate), ssid=s.ssid)
    else:
        if not isinstance(body, STAMPSessionReflectorTestUnauthenticated):
            body = STAMPSessionReflectorTestUnauthenticated(raw(body), _parent=udp)
        r = body
        out.update(seq=r.seq, ts=r.getfieldval("ts"), ee=ee(r.err_estimate), ssid=r.ssid,
                   ts_rx=r.getfieldval("ts_rx"), seq_sender=r.seq_sender, ts_sender=r.getfieldval("ts_sender"),
                   ee_sender=ee(r.err_estimate_sender), ttl_sender=r.ttl_sender)
    out["reserialized"] = raw(body)[:44].hex()
    return out


def build(n, spec):
    for i in range(n):
        p = (Ether(dst=spec["dst_mac"], src=spec["src_mac"]) /
             IPv6(src=spec["src"], dst=spec["dst"], hlim=spec["hlim"]) /
             UDP(sport=spec["sport"], dport=862) /
             STAMPSessionSenderTestUnauthenticated(
                 seq=i, ts=spec["ts"] + i,
                 err_estimate=ErrorEstimate(S=1, Z=0, scale=spec["scale"], multiplier=spec["multiplier"]),
                 ssid=spec["ssid"]))
        print(raw(p).hex())


if __name__ == "__main__":
    if sys.argv[1] == "parse":
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(parse(line)))
    else:
        build(int(sys.argv[2]), json.load(sys.stdin))
