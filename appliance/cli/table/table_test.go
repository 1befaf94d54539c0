package table

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestLayouts(t *testing.T) {
	ports := func() *Table {
		tb := New(Column{Name: "PORT"}, Column{Name: "RX PACKETS", Right: true}, Column{Name: "ADDRESSES", Wrap: true})
		tb.Add("eth0", "12", "2001:db8:1::1/64 192.0.2.1/24 fe80::ff:fe00:101/64")
		tb.Add("eth1", "1234567", "-")
		return tb
	}
	stages := func() *Table {
		tb := New(Column{Name: "PIPELINE"}, Column{Name: "STAGE"}, Column{Name: "PACKETS", Right: true},
			Column{Name: "COUNTERS", Wrap: true, Detail: true}, Column{Name: "DROPS", Wrap: true, Detail: true})
		tb.Key = 2
		tb.Add("source", "generator#0", "0", "sent=602072 sent_bytes=427068952 no_buffer=0", "-")
		tb.Add("source", "link#3", "602072", "lost=2985 delivered=599087", "link_loss=2985")
		tb.Add("lab", "forward#4", "599087", "-", "-")
		return tb
	}
	for _, c := range []struct {
		name  string
		table *Table
		opt   Options
		want  string
	}{
		{"fits", ports(), Options{}, `
PORT  RX PACKETS  ADDRESSES
eth0          12  2001:db8:1::1/64 192.0.2.1/24 fe80::ff:fe00:101/64
eth1     1234567  -
`},
		{"wrap", ports(), Options{Width: 50}, `
PORT  RX PACKETS  ADDRESSES
eth0          12  2001:db8:1::1/64 192.0.2.1/24
                  fe80::ff:fe00:101/64
eth1     1234567  -
`},
		{"wrap-at-slash-and-comma", func() *Table {
			tb := New(Column{Name: "LCORE"}, Column{Name: "PIPELINES", Wrap: true})
			tb.Add("0", "source,lab,rlnc-source,rlnc-relay")
			tb.Add("1", "stamp-sender/stamp-collector")
			return tb
		}(), Options{Width: 26}, `
LCORE  PIPELINES
0      source,lab,
       rlnc-source,
       rlnc-relay
1      stamp-sender/
       stamp-collector
`},
		{"wide", ports(), Options{Width: 50, Wide: true}, `
PORT  RX PACKETS  ADDRESSES
eth0          12  2001:db8:1::1/64 192.0.2.1/24 fe80::ff:fe00:101/64
eth1     1234567  -
`},
		{"detail", stages(), Options{Width: 60}, `
PIPELINE  STAGE        PACKETS
source    generator#0        0
source    link#3        602072
lab       forward#4     599087

source/generator#0
  counters  sent=602072 sent_bytes=427068952 no_buffer=0
source/link#3
  counters  lost=2985 delivered=599087
  drops     link_loss=2985
`},
		{"detail-wraps", stages(), Options{Width: 50}, `
PIPELINE  STAGE        PACKETS
source    generator#0        0
source    link#3        602072
lab       forward#4     599087

source/generator#0
  counters  sent=602072 sent_bytes=427068952
            no_buffer=0
source/link#3
  counters  lost=2985 delivered=599087
  drops     link_loss=2985
`},
		{"detail-in-place", stages(), Options{Width: 100}, `
PIPELINE  STAGE        PACKETS  COUNTERS                                      DROPS
source    generator#0        0  sent=602072 sent_bytes=427068952 no_buffer=0  -
source    link#3        602072  lost=2985 delivered=599087                    link_loss=2985
lab       forward#4     599087  -                                             -
`},
		{"blocks", func() *Table {
			tb := New(Column{Name: "ADDRESS"}, Column{Name: "MAC"}, Column{Name: "STATE"})
			tb.Indent = 2
			tb.Add("2001:db8:1234:5678:9abc:def0:1234:5678", "02:00:00:00:01:02", "REACHABLE")
			tb.Add("192.0.2.2", "-", "INCOMPLETE")
			return tb
		}(), Options{Width: 40}, `
  ADDRESS  2001:db8:1234:5678:9abc:def0:
           1234:5678
  MAC      02:00:00:00:01:02
  STATE    REACHABLE

  ADDRESS  192.0.2.2
  MAC      -
  STATE    INCOMPLETE
`},
		{"no-header", func() *Table {
			tb := New(Cols("", "")...)
			tb.Add("config", "/etc/linerate/lab.toml")
			tb.Add("control", "unix:/run/linerate/linerate.sock")
			return tb
		}(), Options{}, `
config   /etc/linerate/lab.toml
control  unix:/run/linerate/linerate.sock
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			if err := c.table.Write(&b, c.opt); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), strings.TrimPrefix(c.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestFits lays out random tables at random widths: every line fits, and
// every word of every cell is printed, whole where it fits a line.
func TestFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, 1+rng.IntN(n))
		for i := range b {
			b[i] = "abcdefgh=0123456789"[rng.IntN(19)]
		}
		return string(b)
	}
	for n := 0; n < 2000; n++ {
		width := 20 + rng.IntN(100)
		ncol := 1 + rng.IntN(9)
		cols := make([]Column, ncol)
		for i := range cols {
			cols[i] = Column{Name: strings.ToUpper(word(12)), Right: rng.IntN(3) == 0, Wrap: rng.IntN(2) == 0, Detail: rng.IntN(3) == 0}
		}
		tb := New(cols...)
		tb.Indent = rng.IntN(3)
		tb.Key = rng.IntN(3)
		var words []string
		for r := rng.IntN(6); r > 0; r-- {
			row := make([]string, ncol)
			for i := range row {
				var ws []string
				for k := rng.IntN(8); k >= 0; k-- {
					ws = append(ws, word(16))
				}
				sep := []string{" ", ",", "/"}[rng.IntN(3)]
				row[i] = strings.Join(ws, sep)
				words = append(words, ws...)
			}
			tb.Add(row...)
		}
		var b strings.Builder
		if err := tb.Write(&b, Options{Width: width}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, l := range strings.Split(out, "\n") {
			if textWidth(l) > width {
				t.Fatalf("table %d: a line of %d columns in %d:\n%s", n, textWidth(l), width, out)
			}
		}
		for _, w := range words {
			if textWidth(w) < width-tb.Indent-30 && !strings.Contains(out, w) {
				t.Fatalf("table %d: %q not printed in %d columns:\n%s", n, w, width, out)
			}
		}
		var wide strings.Builder
		_ = tb.Write(&wide, Options{Width: width, Wide: true})
		if got := strings.Count(wide.String(), "\n"); got != len(tb.Rows)+1 {
			t.Fatalf("table %d: --wide printed %d lines for %d rows", n, got, len(tb.Rows))
		}
	}
}

func TestFill(t *testing.T) {
	for _, c := range []struct {
		s     string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"a b c", 10, []string{"a b c"}},
		{"aaa bbb ccc", 7, []string{"aaa bbb", "ccc"}},
		{"aaa bbb ccc", 3, []string{"aaa", "bbb", "ccc"}},
		{"a,b,c,d", 4, []string{"a,b,", "c,d"}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"x abcdefghij", 4, []string{"x", "abcd", "efgh", "ij"}},
		{"µs → ms", 4, []string{"µs →", "ms"}},
		// A cell's own indent stays: a row under the row above it.
		{"  rtt", 10, []string{"  rtt"}},
		{"  aaa bbb", 6, []string{"  aaa", "bbb"}},
	} {
		if got := fill(c.s, c.width); !slices.Equal(got, c.want) {
			t.Errorf("fill(%q, %d) = %q, want %q", c.s, c.width, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	var b strings.Builder
	s := "STAMP session 1: 2001:db8:30::1 → 2001:db8:40::1 (stateful reflector, NTP, unauthenticated, every 1ms)"
	_ = Text(&b, Options{Width: 60}, 2, s)
	want := "  STAMP session 1: 2001:db8:30::1 → 2001:db8:40::1 (stateful\n" +
		"    reflector, NTP, unauthenticated, every 1ms)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	_ = Text(&b, Options{Width: 60, Wide: true}, 0, s)
	if b.String() != s+"\n" {
		t.Errorf("wide: %q", b.String())
	}
}

func ExampleTable() {
	tb := New(Column{Name: "PORT"}, Column{Name: "RX PACKETS", Right: true}, Column{Name: "DRIVER COUNTERS", Wrap: true, Detail: true})
	tb.Add("m0", "1000", "poll_wakeups=11 ring_full=7")
	tb.Add("m1", "20", "-")
	fmt.Print(tb.String())
	// Output:
	// PORT  RX PACKETS  DRIVER COUNTERS
	// m0          1000  poll_wakeups=11 ring_full=7
	// m1            20  -
}
