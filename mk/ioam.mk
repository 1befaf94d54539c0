# make bench-ioam: what IOAM costs (issue 6).
#
# First the stage benchmarks of plugins/ioam: encap, transit and decap by
# frame size (66 = the smallest IPv6 frame, 256, 512, 1200, 1500) and trace
# type (1 field, 4 fields, every field), ns/pkt in thread CPU time, with
# ParseCalibration (packet.Parse of the same frame) as a yardstick; goals 20,
# 10 and 20 ns/pkt and 0 allocations. Then bench/ioam: the engine on mem
# ports, one lcore, without IOAM and with it on 0%, 1% and 100% of packets
# (added ns/pkt, p50/p99 latency), and the 10 GbE line-rate check through a
# link stage capped at rate = "10Gbit". BENCH_IOAM_FLAGS passes more flags to
# bench/ioam (-sizes, -count, -runs, -line).

BENCH_IOAM_TIME ?= 100000x
BENCH_IOAM_FLAGS ?=

.PHONY: bench-ioam

bench-ioam:
	$(GO) test -run XXX -bench 'Benchmark(Encap|Transit|Decap|ParseCalibration)' -benchtime $(BENCH_IOAM_TIME) ./plugins/ioam
	$(GO) run ./bench/ioam $(BENCH_IOAM_FLAGS)
