// Package bpf holds the XDP program of ioam.transit, built from the C
// beside this file by bpf2go in two variants, device-bound (Dev, for
// attaching: timestamps from the driver's rx timestamp kfunc) and plain (for
// prog.Run, BPF_PROG_TEST_RUN). The generated .go and .o files are
// committed: a plain go build needs no clang. `make generate` rebuilds them.
package bpf

//go:generate go tool bpf2go -target bpfel -cflags "-O2 -mcpu=v3 -g -Wall -Werror -I../../../internal/bpf/include -I../../../appliance/offload/include -I/usr/include/x86_64-linux-gnu -DLR_DEVBOUND" transitDev transit.c
//go:generate go tool bpf2go -target bpfel -cflags "-O2 -mcpu=v3 -g -Wall -Werror -I../../../internal/bpf/include -I../../../appliance/offload/include -I/usr/include/x86_64-linux-gnu" transitPlain transit.c
