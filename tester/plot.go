package tester

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"github.com/linerate/linerate/internal/plotcolor"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

type namedPlot struct {
	name string
	plot *plot.Plot
	w, h vg.Length
}

// plots are the report's figures: throughput by frame size, loss by offered
// load, and the latency CDFs.
func (rep *Report) plots() ([]namedPlot, error) {
	var out []namedPlot
	tp, err := rep.throughputPlot()
	if err != nil {
		return nil, err
	}
	out = append(out, namedPlot{"throughput", tp, 16 * vg.Centimeter, 10 * vg.Centimeter})
	lp, err := rep.lossPlot()
	if err != nil {
		return nil, err
	}
	out = append(out, namedPlot{"loss", lp, 16 * vg.Centimeter, 10 * vg.Centimeter})
	cp, err := rep.latencyPlot()
	if err != nil {
		return nil, err
	}
	return append(out, namedPlot{"latency", cp, 16 * vg.Centimeter, 10 * vg.Centimeter}), nil
}

// rateUnit is the unit rates up to max are plotted in, pps, kpps, Mpps or
// Gpps, and its size in packets per second.
func rateUnit(max float64) (string, float64) {
	switch {
	case max >= 1e9:
		return "Gpps", 1e9
	case max >= 1e6:
		return "Mpps", 1e6
	case max >= 1e3:
		return "kpps", 1e3
	}
	return "pps", 1
}

// ratioName is "NDR" for 0 and "PDR 0.5%" for the others.
func ratioName(r float64) string {
	if r == 0 {
		return "NDR"
	}
	return fmt.Sprintf("PDR %g%%", 100*r)
}

func (rep *Report) throughputPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Throughput by frame size"
	p.X.Label.Text = "frame size (bytes)"
	var most float64
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				most = math.Max(most, r.Lower)
			}
		}
	}
	unit, div := rateUnit(most)
	p.Y.Label.Text = unit
	var ticks []plot.Tick
	series := map[string]plotter.XYs{}
	var names []string
	for i, s := range rep.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: s.Name})
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				name := GoalName(r)
				if len(s.Searches) > 1 {
					name += " (" + sr.Algorithm + ")"
				}
				if _, ok := series[name]; !ok {
					names = append(names, name)
				}
				series[name] = append(series[name], plotter.XY{X: float64(i), Y: r.Lower / div})
			}
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	var args []any
	for _, n := range names {
		args = append(args, n, series[n])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max = -0.5, float64(len(rep.Sizes))-0.5
	p.Y.Min = 0
	p.Legend.Top = true
	return p, nil
}

// lossPlot is each search's trials' loss by offered load: the DUT's loss
// as filled marks, the trials the tester fell short in (counted as loss)
// apart, as red crosses, and the target loss ratios as dashed lines.
func (rep *Report) lossPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Loss by offered load"
	var most float64
	var ratios []float64
	n := 0
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			if len(sr.Trials) > 0 {
				n++
			}
			for _, t := range sr.Trials {
				most = math.Max(most, t.Rate)
			}
			for _, r := range sr.Results {
				if !slices.Contains(ratios, r.LossRatio) {
					ratios = append(ratios, r.LossRatio)
				}
			}
		}
	}
	unit, div := rateUnit(most)
	p.X.Label.Text = "offered load (" + unit + ")"
	p.Y.Label.Text = "loss (%)"
	colors := plotcolor.Palette(n)
	var short plotter.XYs
	i := 0
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			var xys plotter.XYs
			for _, t := range sr.Trials {
				xy := plotter.XY{X: t.Rate / div, Y: 100 * t.LossRatio()}
				if t.TesterShort > 0 {
					short = append(short, xy)
				} else {
					xys = append(xys, xy)
				}
			}
			if len(sr.Trials) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			sc.Color = colors[i]
			sc.Shape = plotutil.Shape(i)
			p.Add(sc)
			p.Legend.Add(s.Name+" "+sr.Algorithm+" (DUT loss)", sc)
			i++
		}
	}
	if len(short) > 0 {
		sc, err := plotter.NewScatter(short)
		if err != nil {
			return nil, err
		}
		sc.Color = color.RGBA{R: 220, A: 255}
		sc.Shape = draw.CrossGlyph{}
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add("tester short of its load", sc)
	}
	slices.Sort(ratios)
	for _, r := range ratios {
		l := plotter.NewFunction(func(float64) float64 { return 100 * r })
		l.Color = color.Gray{Y: 90}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("target: %s (%g%%)", ratioName(r), 100*r), l)
	}
	// Loss is never below 0; a run without loss still shows its targets.
	// The top is left to the legend (a row about 5.5 % of the height).
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	rows := i + len(ratios)
	if len(short) > 0 {
		rows++
	}
	p.Y.Max /= 1 - math.Min(0.6, 0.055*float64(rows+1))
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

func (rep *Report) latencyPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency CDF at shares of the PDR"
	p.X.Label.Text = "latency (µs)"
	p.Y.Label.Text = "share of packets"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	// A curve per latency trial, or with two streams or more (the
	// directions of a bidirectional test), a curve per stream: the merged
	// latency of two directions hides the slower one.
	type curve struct {
		name string
		h    *Histogram
	}
	var curves []curve
	for _, s := range rep.Sizes {
		for _, l := range s.Latency {
			name := fmt.Sprintf("%s at %g%% PDR", s.Name, 100*l.Share)
			if len(l.Trial.Streams) < 2 {
				if l.Trial.Latency != nil {
					curves = append(curves, curve{name, l.Trial.Latency})
				}
				continue
			}
			for _, st := range l.Trial.Streams {
				if st.Latency != nil {
					curves = append(curves, curve{name + ", " + st.Name, st.Latency})
				}
			}
		}
	}
	colors := plotcolor.Palette(len(curves))
	i := 0
	for _, c := range curves {
		var xys plotter.XYs
		c.h.CDF(func(ns uint64, share float64) {
			xys = append(xys, plotter.XY{X: math.Max(float64(ns)/1e3, 0.001), Y: share})
		})
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = colors[i]
		line.Dashes = plotutil.Dashes(i % 4)
		p.Add(line)
		p.Legend.Add(c.name, line)
		i++
	}
	if i == 0 {
		// An empty log axis cannot be drawn: a note instead.
		p.X.Scale = plot.LinearScale{}
		p.X.Tick.Marker = plot.DefaultTicks{}
		p.Title.Text += " (no latency samples)"
		pts, _ := plotter.NewScatter(plotter.XYs{{X: 0, Y: 0}})
		pts.Color = color.Transparent
		p.Add(pts)
	}
	// Bottom right, where a CDF has already risen: the legend hides none.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}
