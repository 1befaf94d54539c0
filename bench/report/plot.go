package main

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/linerate/linerate/internal/plotcolor"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePlots draws one plot per size key (routes, sessions …): the cost per
// packet or lookup against the size, log scale, one curve per path, as PNG
// and SVG in dir. It returns the files' base names.
func writePlots(dir string, curves []curveOut) ([]string, error) {
	byKey := map[string][]curveOut{}
	for _, c := range curves {
		if len(c.Points) >= 2 {
			byKey[c.Key] = append(byKey[c.Key], c)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A key this run has no curve of keeps no plot of an older run.
	old, _ := filepath.Glob(filepath.Join(dir, "scale-*"))
	for _, f := range old {
		if ext := filepath.Ext(f); ext == ".png" || ext == ".svg" {
			_ = os.Remove(f)
		}
	}
	var files []string
	for _, k := range keys {
		p, err := scalePlot(k, byKey[k])
		if err != nil {
			return files, fmt.Errorf("plot %s: %w", k, err)
		}
		for _, ext := range []string{"png", "svg"} {
			name := "scale-" + k + "." + ext
			if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
				return files, fmt.Errorf("plot %s: %w", name, err)
			}
			files = append(files, name)
		}
	}
	return files, nil
}

func scalePlot(k string, cs []curveOut) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Cost by number of " + k
	p.X.Label.Text = k + " (log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(sizeTicks)
	var units []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.Metric] {
			seen[c.Metric] = true
			units = append(units, c.Metric)
		}
	}
	p.Y.Label.Text = strings.Join(units, ", ")
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	colors := plotcolor.Palette(len(cs))
	for i, c := range cs {
		xy := make(plotter.XYs, len(c.Points))
		for j, pt := range c.Points {
			xy[j].X, xy[j].Y = float64(pt.Size), pt.Value
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		col := colors[i]
		l.Color, s.Color = col, col
		l.Width = vg.Points(1.5)
		s.Shape = plotutil.Shape(i)
		s.Radius = vg.Points(3)
		p.Add(l, s)
		label := path.Base(c.Pkg) + " " + strings.TrimPrefix(c.Path, "Benchmark")
		if len(units) > 1 {
			label += " (" + c.Metric + ")"
		}
		p.Legend.Add(label, []plot.Thumbnailer{l, s}...)
	}
	// Room above the highest point for the legend. Curves an order of
	// magnitude apart go on a log scale, so the flat ones stay readable.
	lo, hi := math.Inf(1), 0.0
	for _, c := range cs {
		for _, pt := range c.Points {
			hi = math.Max(hi, pt.Value)
			if pt.Value > 0 {
				lo = math.Min(lo, pt.Value)
			}
		}
	}
	if hi > 20*lo {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.TickerFunc(logTicks)
		p.Y.Label.Text += " (log scale)"
		p.Y.Min = lo / 1.5
		p.Y.Max = hi * math.Pow(1.6, float64(len(cs)))
	} else {
		p.Y.Max = hi * (1.15 + 0.08*float64(len(cs)))
		p.Y.Tick.Marker = plot.TickerFunc(niceTicks)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// niceTicks puts about six labelled ticks at 1, 2 or 5 times a power of ten
// (gonum's default gives two on a range such as 0–2900).
func niceTicks(lo, hi float64) []plot.Tick {
	if hi <= lo {
		return nil
	}
	raw := (hi - lo) / 6
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step*m >= raw {
			step *= m
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	return ticks
}

// sizeTicks labels the powers of ten of a size axis as 10, 1k, 1M.
func sizeTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Pow(10, math.Ceil(math.Log10(lo))); v <= hi*(1+1e-9); v *= 10 {
		ticks = append(ticks, plot.Tick{Value: v, Label: siCount(int64(math.Round(v)))})
	}
	return ticks
}

// logTicks labels 1, 2 and 5 times each power of ten of a log axis.
func logTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := d * m; v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
			}
		}
	}
	return ticks
}
