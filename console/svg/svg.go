// Package svg draws the console's charts as SVG on the server: bar charts of a queue's usage
// per hour and per day. It is a small writer rather than gonum/plot's SVG backend because the
// console's Content-Security-Policy forbids inline styles, which gonum/plot's output carries on
// every element (style attributes), and because gonum/plot embeds its fonts in each chart
// (tens of kilobytes per chart); these charts use presentation attributes and the page's font.
package svg

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Bars is a bar chart: one bar per label.
type Bars struct {
	// Title names the chart for screen readers (the SVG's title).
	Title string
	// Unit follows each bar's value in its tooltip ("GPU-h"); the axis shows numbers only (say
	// the unit in the chart's caption).
	Unit   string
	Labels []string
	Values []float64
	// Every labels one bar in Every on the x axis (1 when 0).
	Every int
	// Width and Height in pixels (480×160 when 0).
	Width, Height int
	// Class is added to the root element's class ("gpu", "cpu", "memory" colour the bars).
	Class string
}

// Render writes the chart. The text it contains is escaped; the result is safe to put in an
// HTML page as it is.
func (c Bars) Render() template.HTML {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 480
	}
	if h == 0 {
		h = 160
	}
	every := max(c.Every, 1)
	const left, right, top, bottom = 52, 8, 10, 22
	plotW, plotH := float64(w-left-right), float64(h-top-bottom)
	top4 := niceMax(c.Values)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart %s" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`,
		esc(c.Class), w, h, w, h)
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title))
	// Grid: four lines with their values.
	for i := 0; i <= 4; i++ {
		y := float64(top) + plotH - plotH*float64(i)/4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#d0d7de" stroke-width="1"/>`, left, y, w-right, y)
		label := num(top4 * float64(i) / 4)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" font-size="10" fill="#57606a">%s</text>`, left-4, y+3, esc(label))
	}
	n := len(c.Values)
	if n > 0 {
		slot := plotW / float64(n)
		bw := math.Max(slot*0.7, 1)
		for i, v := range c.Values {
			x := float64(left) + slot*float64(i) + (slot-bw)/2
			bh := 0.0
			if top4 > 0 {
				bh = plotH * v / top4
			}
			label := ""
			if i < len(c.Labels) {
				label = c.Labels[i]
			}
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %s %s</title></rect>`,
				x, float64(top)+plotH-bh, bw, bh, esc(label), esc(num(v)), esc(c.Unit))
			if i%every == 0 && label != "" {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#57606a">%s</text>`, x+bw/2, h-6, esc(label))
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it went through esc
}

// niceMax is a round axis maximum at or above every value: 1, 2 or 5 times a power of ten (1
// for no data).
func niceMax(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		m = math.Max(m, v)
	}
	if m <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(m)))
	for _, f := range []float64{1, 2, 5, 10} {
		if m <= f*p {
			return f * p
		}
	}
	return 10 * p
}

// num prints a value with at most 3 significant digits.
func num(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func esc(s string) string { return template.HTMLEscapeString(s) }
