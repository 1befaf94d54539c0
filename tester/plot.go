package tester

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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
	p.Y.Label.Text = "Mpps"
	var ticks []plot.Tick
	series := map[string]plotter.XYs{}
	var names []string
	for i, s := range rep.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: s.Name})
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				name := ratioName(r.LossRatio)
				if len(s.Searches) > 1 {
					name += " (" + sr.Algorithm + ")"
				}
				if _, ok := series[name]; !ok {
					names = append(names, name)
				}
				series[name] = append(series[name], plotter.XY{X: float64(i), Y: r.Lower / 1e6})
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

func (rep *Report) lossPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Loss by offered load"
	p.X.Label.Text = "offered load (kpps)"
	p.Y.Label.Text = "loss (%)"
	i := 0
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			var xys plotter.XYs
			for _, t := range sr.Trials {
				xys = append(xys, plotter.XY{X: t.Rate / 1e3, Y: 100 * t.LossRatio()})
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			sc.Color = plotutil.Color(i)
			sc.Shape = plotutil.Shape(i)
			p.Add(sc)
			p.Legend.Add(s.Name+" "+sr.Algorithm, sc)
			i++
		}
	}
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
	i := 0
	for _, s := range rep.Sizes {
		for _, l := range s.Latency {
			h := l.Trial.Latency
			if h == nil {
				continue
			}
			var xys plotter.XYs
			h.CDF(func(ns uint64, share float64) {
				xys = append(xys, plotter.XY{X: math.Max(float64(ns)/1e3, 0.001), Y: share})
			})
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.Color = plotutil.Color(i)
			line.Dashes = plotutil.Dashes(i / 7)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s at %g%% PDR", s.Name, 100*l.Share), line)
			i++
		}
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
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}
