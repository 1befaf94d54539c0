# make bench-gf: linerate's GF(2^8) kernels side by side with Intel ISA-L
# (Debian libisal-dev, through cgo) and klauspost/reedsolomon, in one process
# on the same buffers: MulAdd at 1408 and 65536 bytes, and the k=32 encode at
# 1408 bytes. Prints GB/s (median of BENCH_GF_RUNS runs), our ratios and the
# goals of issue 5. BENCH_GF_FLAGS passes more flags (-level avx2, -dur 100ms).

BENCH_GF_RUNS ?= 11
BENCH_GF_FLAGS ?=

.PHONY: bench-gf

bench-gf: deps-deb
	$(GO) run ./bench/gf -runs $(BENCH_GF_RUNS) $(BENCH_GF_FLAGS)
