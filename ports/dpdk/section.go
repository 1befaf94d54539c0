//go:build dpdk

package dpdk

import (
	"fmt"

	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/ports"
)

// The [dpdk] table of the config file is this driver's (docs/dpdk.md): it is
// checked when the file is parsed, and read when a port opens.
func init() {
	config.RegisterSection(config.Section{Name: "dpdk", Check: func(_ *config.File, t config.Table) error {
		_, err := decodeEAL(t)
		return err
	}})
}

// decodeEAL reads and checks the [dpdk] section (nil or empty: the defaults).
func decodeEAL(sec ports.Config) (EAL, error) {
	var s struct {
		EAL EAL `toml:"dpdk"`
	}
	if sec != nil {
		if err := sec.Decode(&s); err != nil {
			return EAL{}, err
		}
	}
	if err := s.EAL.withDefaults().check(); err != nil {
		return EAL{}, fmt.Errorf("[dpdk]: %w", err)
	}
	return s.EAL, nil
}
