#!/usr/bin/python3
"""An SRv6 End node (RFC 8986 4.1) between two interfaces, written with
Scapy apart from linerate's SRv6 code: the End node of the SRv6 STAMP tests
on a kernel without seg6local.

    srv6_end.py SPEC_JSON

SPEC_JSON: {"sid": "fc00:e::1",
            "ifaces": {"lrka": "own MAC", "lrkb": "own MAC"},
            "routes": [["fc00:a::/64", "lrka", "neighbour MAC"], ...],
            "timeout": 300}

It reads the IPv6 frames that arrive on the interfaces (AF_PACKET). A packet
to the SID with a Segment Routing Header gets End: Segments Left minus one,
Segment List[Segments Left] becomes the destination, the hop limit minus
one; then it leaves by the route of its new destination, from that
interface's MAC to the route's neighbour. What End refuses (Segments Left 0,
hop limit 1, a bad Last Entry) or cannot route it drops and counts where
the kernel would send an ICMP error; anything else not for the SID it
ignores (the namespace's IPv6 is off: nothing else answers).

It prints "ready" once both sockets are bound. Each line "stats" on stdin
gets a JSON line of its counts back, the sockets' own drops among them. It
exits when stdin closes (the test ended) or after timeout seconds.
"""
import ipaddress
import json
import os
import select
import socket
import struct
import sys
import time

from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

ETH_P_IPV6 = 0x86DD
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33


def end(frame, sid):
    """End on one frame: (the new frame, its destination) or (None, why)."""
    p = Ether(frame)
    ip = p.getlayer(IPv6)
    if ip is None or ip.dst != sid:
        return None, "ignored"
    srh = p.getlayer(IPv6ExtHdrSegmentRouting)
    if srh is None or srh.type != 4:
        return None, "dropped"  # a local SID without an SRH: not End's
    # S02: the SID is the last segment: no upper layer here.
    if srh.segleft == 0:
        return None, "dropped"
    # S05: hop limit exceeded in transit.
    if ip.hlim <= 1:
        return None, "dropped"
    # S08-S09: Last Entry within the header, Segments Left within the list.
    max_le = srh.len // 2 - 1
    if srh.lastentry > max_le or srh.segleft > srh.lastentry + 1:
        return None, "dropped"
    ip.hlim -= 1
    srh.segleft -= 1
    ip.dst = srh.addresses[srh.segleft]
    out = bytes(p)
    if len(out) != len(frame):
        return None, "dropped"  # Scapy built something else: never send it
    return out, ip.dst


def main():
    spec = json.loads(sys.argv[1])
    sid = str(ipaddress.ip_address(spec["sid"]))
    routes = [(ipaddress.ip_network(r[0]), r[1], r[2]) for r in spec["routes"]]
    macs = spec["ifaces"]
    deadline = time.monotonic() + spec.get("timeout", 300)
    socks = {}
    for ifname in macs:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
        # Room for what comes while Scapy is slow: a queue, not a loss.
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        s.bind((ifname, ETH_P_IPV6))
        socks[s] = ifname
    out = {name: s for s, name in socks.items()}
    counts = {"forwarded": 0, "dropped": 0, "ignored": 0, "socket_drops": 0}
    print("ready", flush=True)
    stdin = sys.stdin.buffer.raw
    pending = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select(list(socks) + [stdin], [], [], left)
        for s in ready:
            if s is stdin:
                chunk = os.read(stdin.fileno(), 4096)
                if not chunk:
                    return  # the test ended
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if line.strip() == b"stats":
                        for ss in socks:
                            _, drops = struct.unpack("II", ss.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
                            counts["socket_drops"] += drops
                        print(json.dumps(counts), flush=True)
                continue
            frame, addr = s.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue  # our own, sent on this interface
            new, dst = end(frame, sid)
            if new is None:
                counts[dst] += 1
                continue
            a = ipaddress.ip_address(dst)
            route = next((r for r in routes if a in r[0]), None)
            if route is None:
                counts["dropped"] += 1
                continue
            eth = bytes.fromhex(route[2].replace(":", "")) + bytes.fromhex(macs[route[1]].replace(":", ""))
            out[route[1]].send(eth + new[12:])
            counts["forwarded"] += 1


if __name__ == "__main__":
    main()
