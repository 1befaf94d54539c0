package offloadtest

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -I../include" -no-global-types macswap bpf/macswap.c
