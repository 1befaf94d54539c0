package main

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	var b strings.Builder
	report(&b, "./plugins/stamp\tTestSRv6\tseg6local\tCONFIG_IPV6_SEG6_LWTUNNEL\n"+
		"./plugins/stamp\tTestSRv6\tseg6local\tCONFIG_IPV6_SEG6_LWTUNNEL\n"+ // the checked suite's
		"./ports/xdp\tTestMeta/kernel\tbpf_xdp_adjust_meta\tsome builds refuse it\nnot a record\n")
	want := "kernel features: 2 tests skipped for what this kernel lacks (not run, not failed):\n" +
		"  bpf_xdp_adjust_meta (some builds refuse it)\n    ports/xdp TestMeta/kernel\n" +
		"  seg6local (CONFIG_IPV6_SEG6_LWTUNNEL)\n    plugins/stamp TestSRv6\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	report(&b, "")
	if !strings.Contains(b.String(), "none skipped") {
		t.Errorf("empty report: %q", b.String())
	}
}
