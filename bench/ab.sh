#!/bin/bash
# bench/ab.sh OLD NEW [ROUNDS]: an interleaved A/B of two revisions' stage and
# engine benchmarks, for benchstat. Each round runs every benchmark of OLD,
# then of NEW, on CPU 1, so a machine that slows down for a minute slows both.
# A benchmark one side lacks is left out of its file. Output: ab/old.txt,
# ab/new.txt and ab/benchstat.txt (if benchstat is on PATH:
# go install golang.org/x/perf/cmd/benchstat@latest).
#
#   bench/ab.sh 29b072e main 10
set -euo pipefail
old=$1 new=$2 rounds=${3:-10}
top=$(git rev-parse --show-toplevel)
out=$top/ab
mkdir -p "$out"
# package : benchmark pattern : benchtime. One case of each stage (the ones
# its README quotes), by iteration count, so that a round takes seconds and
# ten rounds fit between two builds' runs; the whole stage benchmarks are
# make bench's. The stage benchmarks report stage-ns/pkt and, in their
# /engine sub-benchmarks, engine+stage-ns/pkt (plugins/stagetest), each beside
# the bare loop of the same run: compare their x-bare ratios.
specs=("appliance:^BenchmarkForwardMem\$:0.5s"
	"plugins/builtin:^BenchmarkForward\$:20000x"
	"plugins/stamp:^Benchmark(Reflector|Collector|Sender)\$/auth=false:20000x"
	"plugins/rlnc:^Benchmark(Encoder|Decoder)\$/k=16/n=1400\$:300x"
	"plugins/ioam:^Benchmark(Encap|Transit|Decap)\$/size=1200/trace=0xf00000\$:20000x"
	"plugins/route:^BenchmarkRoute\$/ip=.*/size=128\$:20000x")
for v in old new; do
	rev=${!v}
	wt=$out/$v-tree
	rm -rf "$wt"
	git -C "$top" worktree add --detach -f "$wt" "$rev" >/dev/null
	for s in "${specs[@]}"; do
		p=${s%%:*}
		(cd "$wt" && go test -c -o "$out/$v-${p//\//_}.test" "./$p")
	done
done
rm -f "$out/old.txt" "$out/new.txt"
for i in $(seq "$rounds"); do
	for v in old new; do
		for s in "${specs[@]}"; do
			IFS=: read -r p re bt <<<"$s"
			(cd "$out/$v-tree/$p" && taskset -c 1 "$out/$v-${p//\//_}.test" -test.run '^$' \
				-test.bench "$re" -test.benchtime "$bt" -test.benchmem) |
				{ grep -E '^(Benchmark|goos|goarch|pkg|cpu)' || true; } | sed "s#^pkg: .*#pkg: $p#" >>"$out/$v.txt"
		done
	done
	echo "round $i of $rounds done" >&2
done
for v in old new; do git -C "$top" worktree remove --force "$out/$v-tree"; done
if command -v benchstat >/dev/null; then benchstat "$out/old.txt" "$out/new.txt" >"$out/benchstat.txt"; fi
# BenchmarkForwardMem's goal is a ratio (engine over the bare loop of the
# same run): its median over the rounds, per side, in forwardmem-ratio.txt.
for v in old new; do
	awk '$1 ~ /ForwardMem\/engine/ { for (i = 2; i <= NF; i++) if ($i == "cpu-ns/pkt") e = $(i - 1) }
		$1 ~ /ForwardMem\/baseline/ { for (i = 2; i <= NF; i++) if ($i == "cpu-ns/pkt") print e / $(i - 1) }' \
		"$out/$v.txt" | sort -g | awk -v v="$v" '{ r[NR] = $1 }
		END { if (NR) printf "%s: engine/baseline median %.2f of %d rounds\n", v,
			NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2, NR }'
done | tee "$out/forwardmem-ratio.txt"
echo "$out"
