package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Accuracy: how many tokens concurrent requests get through a limit.

const (
	accuracyLimit = 10000 // tokens per minute, on one key
	requestTokens = 1000  // each request declares max_tokens 1,000 and uses 1,000
	streamSeconds = 0.5   // how long a response streams, in simulated time
)

// accuracyMode is a way of limiting whose accuracy is measured, and how
// its line is drawn.
type accuracyMode struct {
	name      string
	topLevel  string // configuration fields besides the limit
	color     color.RGBA
	lineWidth float64 // points
}

var accuracyModes = []accuracyMode{
	{"fixed window", "", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, 4},
	{"sliding window", `"window_type": "sliding",`, color.RGBA{R: 0xff, G: 0x9f, B: 0x1c, A: 0xff}, 2},
	{"reservation (fixed window)", plugintest.ReservationOn, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, 2},
}

// accuracyRun is the admissions of one simulated run.
type accuracyRun struct {
	mode       accuracyMode
	inFlight   int
	seconds    int       // simulated length
	admittedAt []float64 // simulated seconds from the start, one per admitted request, in order
}

// measureAccuracy runs every mode at every number of requests in flight
// through the plugin in Go mode (vm: the code WASM mode runs, several times
// faster) on a real redis-server whose scripts run on a test clock.
func measureAccuracy(t tb, s reportScale, vm types.VMContext) []accuracyRun {
	redis := redistest.Start(t)
	var runs []accuracyRun
	for _, mode := range accuracyModes {
		for _, k := range s.inFlight {
			runs = append(runs, simulate(t, vm, redis, mode, k, s.minutes))
		}
	}
	return runs
}

// simulate keeps k requests in flight for some simulated minutes against
// 10,000 tokens a minute: every second it opens k requests, lets Redis decide
// on all of them before any completes, then completes the admitted ones (half
// a second later) with their usage; demand is k × 1,000 tokens a second, far
// above the limit. It records when each admitted request was admitted.
func simulate(t tb, vm types.VMContext, redis *redistest.Server, mode accuracyMode, k, minutes int) accuracyRun {
	redis.Do("FLUSHALL")
	start := float64((redis.Now()/60 + 60) * 60) // a minute's start: the run begins with a window
	defer redis.SetClock(0)
	host, stop := plugintest.StartEmulator(t, vm, plugintest.APIKeyConfig(mode.topLevel, fmt.Sprintf(`"token_per_minute": %d`, accuracyLimit)))
	defer stop()
	p := &plugintest.Plugin{T: t, Host: host, Redis: redis}
	key := [2]string{"x-api-key", "sk-1"}
	body := plugintest.ChatBody(requestTokens)
	usage := plugintest.SSEEvents(plugintest.OpenAIStream(3, 1, requestTokens-1))

	run := accuracyRun{mode: mode, inFlight: k, seconds: minutes * 60}
	for at := range run.seconds { // a batch a second
		redis.SetClock(start + float64(at))
		batch := make([]*plugintest.Exchange, k)
		for i := range batch {
			batch[i] = p.SendBody(body, key)
		}
		for _, x := range batch {
			x.Answer()
		}
		redis.SetClock(start + float64(at) + streamSeconds)
		for _, x := range batch {
			if !x.Passed() {
				x.RequireRejected(429)
				x.Done()
				continue
			}
			run.admittedAt = append(run.admittedAt, float64(at))
			x.Respond("text/event-stream", usage...)
		}
	}
	return run
}

// peakClockMinute is the most tokens admitted in one clock-aligned minute,
// as a multiple of the limit.
func (r accuracyRun) peakClockMinute() float64 {
	perMinute := map[int]int{}
	peak := 0
	for _, at := range r.admittedAt {
		m := int(at) / 60
		perMinute[m]++
		peak = max(peak, perMinute[m])
	}
	return float64(peak*requestTokens) / accuracyLimit
}

// peakAnyMinute is the most tokens admitted in any 60 seconds [t, t+60), as
// a multiple of the limit.
func (r accuracyRun) peakAnyMinute() float64 {
	peak, first := 0, 0
	for last, at := range r.admittedAt {
		for r.admittedAt[first] <= at-60 {
			first++
		}
		peak = max(peak, last-first+1)
	}
	return float64(peak*requestTokens) / accuracyLimit
}

// trailingMinute is the tokens admitted in the 60 seconds up to each second
// of the run, (t-60, t].
func (r accuracyRun) trailingMinute() plotter.XYs {
	points := make(plotter.XYs, r.seconds)
	first, next := 0, 0
	for t := range points {
		for next < len(r.admittedAt) && r.admittedAt[next] <= float64(t) {
			next++
		}
		for first < next && r.admittedAt[first] <= float64(t)-60 {
			first++
		}
		points[t] = plotter.XY{X: float64(t), Y: float64((next - first) * requestTokens)}
	}
	return points
}

// Plots.

// plotFile is one rendered plot.
type plotFile struct {
	name     string // file name under plotDir
	inFlight int
	png      []byte
}

// plotAccuracy draws, for each number of requests in flight asked for, the
// tokens admitted in the trailing 60 s by every mode, against the limit.
func plotAccuracy(t tb, runs []accuracyRun, inFlight []int) []plotFile {
	var plots []plotFile
	for _, k := range inFlight {
		png, err := plotTrailingMinute(runs, k)
		if err != nil {
			t.Fatalf("plotting %d in flight: %v", k, err)
		}
		plots = append(plots, plotFile{name: fmt.Sprintf("admitted-tokens-%d-in-flight.png", k), inFlight: k, png: png})
	}
	return plots
}

// thousandsTicks are gonum's default ticks, labelled with thousands
// separators.
type thousandsTicks struct{}

func (thousandsTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, tick := range ticks {
		if tick.Label != "" {
			ticks[i].Label = thousands(int64(tick.Value))
		}
	}
	return ticks
}

// minuteTicks mark every minute, labelled m:00, and every 10 seconds.
type minuteTicks struct{}

func (minuteTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for s := 10 * math.Ceil(min/10); s <= max; s += 10 {
		tick := plot.Tick{Value: s}
		if int(s)%60 == 0 {
			tick.Label = fmt.Sprintf("%d:00", int(s)/60)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

func plotTrailingMinute(runs []accuracyRun, k int) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d requests in flight, limit %s tokens a minute", k, thousands(accuracyLimit))
	p.X.Label.Text = "simulated time (minutes:seconds)"
	p.X.Tick.Marker = minuteTicks{}
	p.Y.Label.Text = "tokens admitted in the last 60 s"
	p.Y.Tick.Marker = thousandsTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	highest := float64(accuracyLimit)
	for _, r := range runs {
		if r.inFlight != k {
			continue
		}
		points := r.trailingMinute()
		line, err := plotter.NewLine(points)
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		line.Color = r.mode.color
		line.Width = vg.Points(r.mode.lineWidth) // where modes coincide, the wider line drawn first shows around the next
		p.Add(line)
		p.Legend.Add(r.mode.name, line)
		for _, pt := range points {
			highest = max(highest, pt.Y)
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.3*highest // room for the legend above the lines
	p.X.Min, p.X.Max = 0, float64(runs[0].seconds)
	limit := plotter.NewFunction(func(float64) float64 { return accuracyLimit })
	limit.Color = color.Black
	limit.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(limit)
	p.Legend.Add("limit", limit)

	w, err := p.WriterTo(9*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
