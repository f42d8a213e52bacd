package chart

import (
	"bytes"
	"image/png"
	"math"
	"slices"
	"testing"
)

func TestTicks(t *testing.T) {
	tests := []struct {
		max  float64
		want []float64
		top  float64
	}{
		{0, []float64{0, 1}, 1},
		{-3, []float64{0, 1}, 1},
		{10, []float64{0, 2, 4, 6, 8, 10}, 10},
		{200, []float64{0, 50, 100, 150, 200}, 200},
		{7.3, []float64{0, 2, 4, 6, 8}, 8},
		{0.42, []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5}, 0.5},
		{5000, []float64{0, 1000, 2000, 3000, 4000, 5000}, 5000},
	}
	for _, tt := range tests {
		got, top := ticks(tt.max)
		if top != tt.top || len(got) != len(tt.want) {
			t.Errorf("ticks(%v) = %v, %v; want %v, %v", tt.max, got, top, tt.want, tt.top)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tt.want[i]) > 1e-9 {
				t.Errorf("ticks(%v) = %v; want %v", tt.max, got, tt.want)
				break
			}
		}
		if got[len(got)-1] < tt.max {
			t.Errorf("ticks(%v) do not cover the maximum", tt.max)
		}
	}
}

func TestWritePNG(t *testing.T) {
	c := &Chart{
		Title: "Nodes initialized", XLabel: "seconds", YLabel: "nodes",
		Series: []Series{
			{Name: "nephele", Step: true, Points: []Point{{0, 0}, {1.5, 100}, {2, 200}}},
			{Name: "upstream", Points: []Point{{0, 0}, {18, 200}}},
			{Name: "single", Points: []Point{{3, 50}}},
			{Name: "empty"},
		},
		Width: 640, Height: 360,
	}
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 360 {
		t.Fatalf("size %v, want 640x360", b)
	}
	// The first series' color must be on the image: the line was drawn.
	want := Palette[0]
	found := false
	for y := 0; y < 360 && !found; y++ {
		for x := 0; x < 640; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatal("no pixel of the first series' color")
	}
}

func TestWritePNGRefusesBadInput(t *testing.T) {
	for name, c := range map[string]*Chart{
		"NaN":       {Series: []Series{{Points: []Point{{math.NaN(), 1}}}}},
		"infinity":  {Series: []Series{{Points: []Point{{1, math.Inf(1)}}}}},
		"too small": {Width: 20, Height: 20},
	} {
		if err := c.WritePNG(&bytes.Buffer{}); err == nil {
			t.Errorf("%s: WritePNG succeeded", name)
		}
	}
}

func TestFormat(t *testing.T) {
	got := []string{format(0), format(200), format(0.5), format(2.5)}
	if want := []string{"0", "200", "0.5", "2.5"}; !slices.Equal(got, want) {
		t.Fatalf("format = %v, want %v", got, want)
	}
}
