#!/usr/bin/python3
"""Scapy's STAMP layer as the Session-Sender against a reflector on the link.

    scapy_xdp.py IFACE N < spec.json

builds N unauthenticated test packets with scapy.contrib.stamp (the spec of
scapy_stamp.py build; the packets whose index is in spec["tlv"] get the TLV
bytes spec["tlv_hex"] after the base packet), sends them on IFACE one at a
time, each once the last one's reply came back (or after 30 s without it), and
prints each as "sent HEX" and each reply it captures (the frames whose UDP
source port is 862) as "reply HEX". Waiting keeps a stateful reflector's
order: on a loaded host a packet its XDP program passes to Go could otherwise
be answered after the next one, which the program answers itself.
"""
import json
import sys
import threading

from scapy.all import AsyncSniffer, Ether, Raw, raw, sendp
from scapy.contrib.stamp import ErrorEstimate, STAMPSessionSenderTestUnauthenticated
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6


def main():
    iface, n = sys.argv[1], int(sys.argv[2])
    spec = json.load(sys.stdin)
    # The first packet leaves once the socket is open, however long a busy
    # machine takes to open it.
    ready = threading.Event()
    answered = threading.Semaphore(0)
    sniffer = AsyncSniffer(iface=iface, lfilter=lambda p: UDP in p and p[UDP].sport == 862,
                           prn=lambda p: answered.release(),
                           count=n, timeout=60, started_callback=ready.set)
    sniffer.start()
    if not ready.wait(60):
        sys.exit("the sniffer did not start")
    for i in range(n):
        p = (Ether(dst=spec["dst_mac"], src=spec["src_mac"]) /
             IPv6(src=spec["src"], dst=spec["dst"], hlim=spec["hlim"], tc=spec["tc"]) /
             UDP(sport=spec["sport"], dport=862) /
             STAMPSessionSenderTestUnauthenticated(
                 seq=i, ts=spec["ts"] + i,
                 err_estimate=ErrorEstimate(S=1, Z=0, scale=spec["scale"], multiplier=spec["multiplier"]),
                 ssid=spec["ssid"]))
        if i in spec.get("tlv", []):
            p = p / Raw(bytes.fromhex(spec["tlv_hex"]))
        print("sent " + raw(p).hex(), flush=True)
        sendp(p, iface=iface, verbose=False)
        answered.acquire(timeout=30)
    sniffer.join()
    for r in sniffer.results or []:
        print("reply " + raw(r).hex(), flush=True)


if __name__ == "__main__":
    main()
