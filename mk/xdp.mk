# The xdp port (ports/xdp): AF_XDP on an ordinary Linux interface.
#
# make bench-xdp (root): bench/xdp, on veth pairs in namespaces of its own,
# each side by side with its baseline in the same run:
#   1. the port's rx→tx (MAC swap) against xskfwd, a C AF_XDP loop on raw
#      system calls (bench/xdp/cref), as CPU ns/pkt and their ratio;
#   2. the dispatcher's cost to the host's own traffic forwarded by a router
#      namespace, against an empty XDP_PASS program taking turns with it
#      batch by batch: the ratio with its 95% confidence interval, the cost
#      in ns/pkt, and the load average.
# BENCH_XDP_FLAGS passes flags to the program (-rounds 7, -batches 30,
# -trials 20, -rounds-per-trial 50, -size 64, -part port|dispatcher).

BENCH_XDP_FLAGS ?=

.PHONY: bench-xdp

$(BIN)/xskfwd: bench/xdp/cref/xskfwd.c
	@mkdir -p $(BIN)
	$(CC) -O2 -Wall -Wextra -o $@ $<

bench-xdp: $(BIN)/xskfwd
	$(GO) run ./bench/xdp -ref $(BIN)/xskfwd $(BENCH_XDP_FLAGS)
