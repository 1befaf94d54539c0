package config

import "testing"

func TestDPDKSectionIsDeferred(t *testing.T) {
	f, err := Parse("x.toml", []byte(`version = 1
[control]
listen = ""
[dpdk]
eal_args = ["--no-huge"]
memory = "256MiB"
[[pipelines]]
name = "p"
[[pipelines.stages]]
kind = "forward"
port = "in"
`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		EALArgs []string `toml:"eal_args"`
		Memory  ByteSize `toml:"memory"`
	}
	if err := f.DPDK.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if len(c.EALArgs) != 1 || c.Memory != 256<<20 {
		t.Fatalf("decoded %+v", c)
	}
	var strict struct {
		EALArgs []string `toml:"eal_args"`
	}
	if err := f.DPDK.Decode(&strict); err == nil {
		t.Fatal("an unknown [dpdk] key was accepted")
	} else if want := "x.toml:6: dpdk.memory"; !contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
