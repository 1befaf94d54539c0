package external

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// TestExitWeAskedFor: go-plugin logs "plugin process exited" at error level
// when the process was killed; when the supervisor killed it (a stop, a
// restart after a hang) that is no error and logs at Info. An exit the
// supervisor did not cause stays an error.
func TestExitWeAskedFor(t *testing.T) {
	for _, killing := range []bool{true, false} {
		var b bytes.Buffer
		var k atomic.Bool
		k.Store(killing)
		hclogBridge(slog.New(slog.NewTextHandler(&b, nil)), &k).Error("plugin process exited",
			"path", "/p", "pid", 7, "error", errors.New("signal: killed").Error())
		want := "level=ERROR"
		if killing {
			want = "level=INFO"
		}
		if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), `msg="plugin process exited"`) {
			t.Errorf("killing %v: %s, want %s", killing, b.String(), want)
		}
	}
}
