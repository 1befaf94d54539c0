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
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
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
	for i, c := range cs {
		xy := make(plotter.XYs, len(c.Points))
		for j, pt := range c.Points {
			xy[j].X, xy[j].Y = float64(pt.Size), pt.Value
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		col := plotutil.Color(i)
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
	// Room above the highest point for the legend.
	max := 0.0
	for _, c := range cs {
		for _, pt := range c.Points {
			if pt.Value > max {
				max = pt.Value
			}
		}
	}
	p.Y.Max = max * (1.15 + 0.08*float64(len(cs)))
	p.Y.Tick.Marker = plot.TickerFunc(niceTicks)
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
