# STAMP (plugins/stamp).
#
# make generate (mk/generate.mk) rebuilds the plugin's protos: linerate's own
# plugins/stamp/api/stamp.proto and the seed controller's southbound protos in
# plugins/stamp/api/srv6pm.
#
# make bench-stamp: the engine on mem ports mixing data traffic with 0, 1, 10
# and 100% STAMP, for the reflector and for the collector, like the seed
# paper's Figs. 15-16; then the per-core stage benchmarks. BENCH_STAMP_FLAGS
# passes flags to the program (-count 2000000, -runs 3, -size 128).

BENCH_STAMP_FLAGS ?=

.PHONY: bench-stamp

bench-stamp:
	$(GO) run ./bench/stamp $(BENCH_STAMP_FLAGS)
	$(GO) test -run XXX -bench 'Benchmark(Reflector|Collector|Sender)' -benchtime 2s ./plugins/stamp

# make bench-xdp-stamp: the XDP reflector and collector in prog.Run
# (BPF_PROG_TEST_RUN) beside an XDP_TX MAC-swap program and the MAC swap
# with the reflector's two clock reads, alternating in one run; prints each
# one's ns/pkt and the ratios. Then the parts' costs (BenchmarkXDPCosts:
# clock reads, map operations, checksums, the ring buffer). Root. Part of
# make bench-xdp.
.PHONY: bench-xdp-stamp bench-xdp
bench-xdp: bench-xdp-stamp
bench-xdp-stamp:
	$(GO) test -run XXX -bench 'BenchmarkXDP(Programs|Costs)' -benchtime 200000x -count 3 ./plugins/stamp
