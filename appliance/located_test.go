package appliance

import (
	"errors"
	"fmt"
	"testing"
)

// TestLocatedOnce: a stage's error that names its own place in the file
// (s.Config.Where(), as the external stage's do) says the place once, then
// the stage, then the reason; the error it wraps is still there.
func TestLocatedOnce(t *testing.T) {
	inner := errors.New("sha256 differs")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("bad-sha.toml:22: %w", inner), `bad-sha.toml:22: stage "dscp" (external): sha256 differs`},
		{inner, `bad-sha.toml:22: stage "dscp" (external): sha256 differs`},
		{fmt.Errorf(`stage "dscp" (external): %w`, inner), `bad-sha.toml:22: stage "dscp" (external): sha256 differs`},
	} {
		err := located(c.err, "bad-sha.toml:22", `stage "dscp" (external)`)
		if err.Error() != c.want {
			t.Errorf("located(%q) = %q, want %q", c.err, err, c.want)
		}
		if !errors.Is(err, inner) {
			t.Errorf("located(%q) lost the error it wraps", c.err)
		}
	}
}
