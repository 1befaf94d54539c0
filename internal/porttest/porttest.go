// Package porttest is what the datapath drivers' tests share: a ports.Config
// over TOML text and slab pools checked for leaks.
package porttest

import (
	"fmt"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/linerate/linerate/appliance/packet"
)

// Config is a ports.Config over TOML text, strict like the real one: an
// unknown key is an error.
type Config string

// Decode decodes the text into v.
func (c Config) Decode(v any) error {
	md, err := toml.Decode(string(c), v)
	if err != nil {
		return err
	}
	if u := md.Undecoded(); len(u) > 0 {
		return fmt.Errorf("test.toml: unknown keys %v", u)
	}
	return nil
}

// Where names the port's table.
func (c Config) Where() string { return "test.toml [ports.p]" }

// Pool makes a slab pool named after t (dataRoom 0: the default). When t ends
// every buffer must be back; then the pool is closed.
func Pool(t testing.TB, buffers, dataRoom int) *packet.Slab {
	t.Helper()
	s, err := packet.NewSlab(packet.SlabConfig{Name: t.Name(), Buffers: buffers, DataRoom: dataRoom})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pool leak: %v", err)
		}
	})
	return s
}
