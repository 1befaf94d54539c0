# linerate test (tester/).
#
# make bench-tester: the generator's tx rate on afpacket (a veth pair the
# program makes, root) against a C loop that sends the same frames (sequence
# number, timestamp and UDP checksum written into each, as the generator does;
# TestSameFrames checks) through a TPACKET_V3 tx ring on the same interface,
# and a C loop of one fixed frame, in rounds, per CPU second of the
# sending thread; then the search time of MLRsearch (draft-01) against binary
# search on a simulated device at the same final duration and precision, and
# of draft-15 with CSIT's goals, each as a ratio to binary search's.
# BENCH_TESTER_FLAGS passes flags to the program (-rounds 5, -duration 2s, -size 64).
# On DPDK's net_null, `make bench-dpdk BENCH_DPDK_FLAGS=-generator` compares
# the generator with a C loop that allocates, copies and tx_bursts the same
# frames from the same mbuf pool, writing the same sequence number, timestamp
# and UDP checksum into each.

BENCH_TESTER_FLAGS ?=

.PHONY: bench-tester

bench-tester:
	$(GO) run ./bench/tester $(BENCH_TESTER_FLAGS)
	$(GO) test -run XXX -bench BenchmarkSearchTime ./tester/search
