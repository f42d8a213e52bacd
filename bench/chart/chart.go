package chart

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Point is one sample.
type Point struct{ X, Y float64 }

// Series is one line.
type Series struct {
	Name   string
	Points []Point
	// Step draws the line as a staircase: each value holds until the next point,
	// which is right for cumulative counts.
	Step bool
}

// Chart is a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Width and Height are the image size; zero means 900x480.
	Width, Height int
}

// Palette is the series colors, in order; it repeats after the last.
var Palette = []color.RGBA{
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0xff, 0x7f, 0x0e, 0xff}, // orange
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0x2c, 0xa0, 0x2c, 0xff}, // green
	{0x94, 0x67, 0xbd, 0xff}, // purple
}

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
)

const (
	marginLeft   = 70
	marginRight  = 20
	marginTop    = 46
	marginBottom = 46
)

// WritePNG renders the chart.
func (c *Chart) WritePNG(w io.Writer) error {
	width, height := c.Width, c.Height
	if width == 0 {
		width = 900
	}
	if height == 0 {
		height = 480
	}
	if width < marginLeft+marginRight+50 || height < marginTop+marginBottom+50 {
		return fmt.Errorf("chart %q: %dx%d is too small", c.Title, width, height)
	}
	xmax, ymax := 0.0, 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.X, 0) || math.IsInf(p.Y, 0) {
				return errors.New("chart " + strconv.Quote(c.Title) + ": a point is not a finite number")
			}
			xmax, ymax = math.Max(xmax, p.X), math.Max(ymax, p.Y)
		}
	}
	xticks, xtop := ticks(xmax)
	yticks, ytop := ticks(ymax)

	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	plot := image.Rect(marginLeft, marginTop, width-marginRight, height-marginBottom)
	px := func(x float64) float64 { return float64(plot.Min.X) + x/xtop*float64(plot.Dx()) }
	py := func(y float64) float64 { return float64(plot.Max.Y) - y/ytop*float64(plot.Dy()) }

	for _, t := range yticks {
		y := int(math.Round(py(t)))
		line(img, float64(plot.Min.X), float64(y), float64(plot.Max.X), float64(y), grid, 1)
		label := format(t)
		text(img, plot.Min.X-6-width7(label), y+4, label, black)
	}
	for _, t := range xticks {
		x := int(math.Round(px(t)))
		line(img, float64(x), float64(plot.Min.Y), float64(x), float64(plot.Max.Y), grid, 1)
		label := format(t)
		text(img, x-width7(label)/2, plot.Max.Y+16, label, black)
	}
	line(img, float64(plot.Min.X), float64(plot.Max.Y), float64(plot.Max.X), float64(plot.Max.Y), black, 1)
	line(img, float64(plot.Min.X), float64(plot.Min.Y), float64(plot.Min.X), float64(plot.Max.Y), black, 1)

	text(img, width/2-width7(c.Title)/2, 16, c.Title, black)
	text(img, plot.Min.X+plot.Dx()/2-width7(c.XLabel)/2, height-10, c.XLabel, black)
	text(img, 6, marginTop-12, c.YLabel, black)

	for i, s := range c.Series {
		col := Palette[i%len(Palette)]
		for j := 1; j < len(s.Points); j++ {
			a, b := s.Points[j-1], s.Points[j]
			if s.Step {
				line(img, px(a.X), py(a.Y), px(b.X), py(a.Y), col, 2)
				line(img, px(b.X), py(a.Y), px(b.X), py(b.Y), col, 2)
			} else {
				line(img, px(a.X), py(a.Y), px(b.X), py(b.Y), col, 2)
			}
		}
		if len(s.Points) == 1 {
			p := s.Points[0]
			line(img, px(p.X)-2, py(p.Y), px(p.X)+2, py(p.Y), col, 3)
		}
		// Legend, top left inside the plot.
		ly := plot.Min.Y + 14 + 16*i
		line(img, float64(plot.Min.X+10), float64(ly-4), float64(plot.Min.X+34), float64(ly-4), col, 3)
		text(img, plot.Min.X+40, ly, s.Name, black)
	}
	return png.Encode(w, img)
}

// ticks returns round tick values from 0 covering max, and the top of the axis.
func ticks(maxV float64) ([]float64, float64) {
	if maxV <= 0 {
		return []float64{0, 1}, 1
	}
	raw := maxV / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	top := math.Ceil(maxV/step) * step
	var out []float64
	for v := 0.0; v <= top+step/2; v += step {
		out = append(out, v)
	}
	return out, top
}

// format writes a tick value without needless decimals.
func format(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// width7 is the width of s in the 7x13 font.
func width7(s string) int { return 7 * len([]rune(s)) }

func text(img *image.RGBA, x, y int, s string, col color.Color) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws a line of the given thickness by stepping along it.
func line(img *image.RGBA, x0, y0, x1, y1 float64, col color.RGBA, thick int) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
	r := thick / 2
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		x := int(math.Round(x0 + t*(x1-x0)))
		y := int(math.Round(y0 + t*(y1-y0)))
		for dx := -r; dx <= thick-1-r; dx++ {
			for dy := -r; dy <= thick-1-r; dy++ {
				if (image.Point{x + dx, y + dy}).In(img.Rect) {
					img.SetRGBA(x+dx, y+dy, col)
				}
			}
		}
	}
}
