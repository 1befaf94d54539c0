# make bench-rlnc-multicast: CODED IP's claim, reproduced in virtual time.
# linerate nodes (generator → rlnc.encoder at the source, rlnc.recoder at the
# relays, rlnc.decoder → sink at the terminals) joined by mem links of equal
# capacity, in the butterfly and in a 22-node network shaped like CODED IP's
# testbed. The best routing runs on the same links too: store-and-forward
# multicast (bench.tree) over an optimal fractional Steiner-tree packing from
# an LP (1.5 in the butterfly). Prints each sink's goodput in units of one
# link's capacity, coded and routed, beside its min-cut and the LP value;
# fails unless coding reaches 1.8 in the butterfly.
# BENCH_RLNC_FLAGS passes more flags (-k 16, -loss 0.02 -margin 2, -pace=false
# -margin 17 (unpaced relays need that margin to decode at all, see -help),
# -dur 10s).

BENCH_RLNC_FLAGS ?=

.PHONY: bench-rlnc-multicast

bench-rlnc-multicast:
	$(GO) run ./bench/rlnc $(BENCH_RLNC_FLAGS)
