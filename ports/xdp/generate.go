package xdp

// The dispatcher, twice from one source: device-bound (attached; it may read
// the NIC's rx timestamp) and plain (prog.Run in tests). make generate runs
// these; the output is committed, so a plain go build needs no clang.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -I../../appliance/offload/include" -no-global-types dispatcherPlain bpf/dispatcher.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -DLR_DEV_BOUND -I../../appliance/offload/include" -no-global-types dispatcherDev bpf/dispatcher.c
