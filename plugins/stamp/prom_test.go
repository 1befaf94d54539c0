package stamp

import (
	"io"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/internal/enginetest"
)

// /metrics carries each sender session's metrics: a scrape of an engine whose
// links delay 2 ms forward and 5 ms backward, with a stateful reflector and
// every 20th packet lost forward, shows those delays and that loss per
// direction under the session's ssid.
func TestPrometheusSessions(t *testing.T) {
	clk := clock.NewSim(testUnixBase)
	e := enginetest.Start(t, loopConfig(
		"delay = \"2ms\"\nloss_pattern = \""+strings.Repeat("0", 19)+"1\"", "delay = \"5ms\"",
		"[[pipelines.stages.sessions]]\nssid = 7\nreflector = \"2001:db8:b::2\"\nreflector_mode = \"stateful\"\ncount = 400\n",
		"[[pipelines.stages.sessions]]\nssid = 7\nmode = \"stateful\"\n"), appliance.Options{Manual: true, Clock: clk})
	enginetest.Run(e, clk, 5*time.Second, 50*time.Microsecond)

	srv := httptest.NewServer(metrics.Handler(e, host.Collectors(control.Host(e))...))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	value := func(series string) float64 {
		t.Helper()
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				return f
			}
		}
		t.Fatalf("no series %s in\n%s", series, text)
		return 0
	}
	near := func(series string, want, tol float64) {
		t.Helper()
		if got := value(series); math.Abs(got-want) > tol*want {
			t.Errorf("%s = %g, want %g ±%.0f%%", series, got, want, tol*100)
		}
	}
	if got := value(`linerate_stamp_session_sent{ssid="7"}`); got != 400 {
		t.Errorf("sent %g, want 400", got)
	}
	near(`linerate_stamp_session_delay_seconds{direction="forward",ssid="7",quantile="0.5"}`, 0.002, 0.05)
	near(`linerate_stamp_session_delay_seconds{direction="backward",ssid="7",quantile="0.99"}`, 0.005, 0.05)
	near(`linerate_stamp_session_delay_seconds{direction="round_trip",ssid="7",quantile="0.9"}`, 0.007, 0.05)
	near(`linerate_stamp_session_delay_max_seconds{direction="backward",ssid="7"}`, 0.005, 0.05)
	// A delay's first figures: its minimum, and its mean as _sum / _count.
	near(`linerate_stamp_session_delay_min_seconds{direction="forward",ssid="7"}`, 0.002, 0.05)
	near(`linerate_stamp_session_delay_min_seconds{direction="round_trip",ssid="7"}`, 0.007, 0.05)
	if mean := value(`linerate_stamp_session_delay_seconds_sum{direction="backward",ssid="7"}`) /
		value(`linerate_stamp_session_delay_seconds_count{direction="backward",ssid="7"}`); math.Abs(mean-0.005) > 0.05*0.005 {
		t.Errorf("backward mean %g, want 5ms", mean)
	}
	// 20 of 400 lost forward; the last sent may still count as in flight.
	lostF := value(`linerate_stamp_session_lost{direction="forward",ssid="7"}`)
	inFlight := value(`linerate_stamp_session_in_flight{ssid="7"}`)
	if lostF+inFlight != 20 || value(`linerate_stamp_session_lost{direction="backward",ssid="7"}`) != 0 {
		t.Errorf("lost forward %g (+%g in flight), backward %g", lostF, inFlight, value(`linerate_stamp_session_lost{direction="backward",ssid="7"}`))
	}
	if got := value(`linerate_stamp_session_received{ssid="7"}`); got != 400-lostF-inFlight {
		t.Errorf("received %g", got)
	}
	if got := value(`linerate_stamp_session_delay_seconds_count{direction="forward",ssid="7"}`); got != 400-lostF-inFlight {
		t.Errorf("forward delays counted %g", got)
	}
}
