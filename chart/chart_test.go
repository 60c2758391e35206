package chart

import (
	"bytes"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]string{"run.svg": SVG, "RUN.PNG": PNG, "a/b.c/kv.png": PNG} {
		if got, err := FormatOf(name); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"run.pdf", "run", ""} {
		if _, err := FormatOf(name); err == nil {
			t.Errorf("FormatOf(%q): no error", name)
		}
	}
}

// Two panels written as SVG and PNG come out as those formats: an SVG
// document with both titles, and a PNG by its 8-byte signature.
func TestWriteStacked(t *testing.T) {
	panel := func(title string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		return p
	}
	var svg, png bytes.Buffer
	if err := WriteStacked(&svg, SVG, []*plot.Plot{panel("kv usage"), panel("waiting")}, 4*vg.Inch, 4*vg.Inch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg.Bytes(), []byte("<svg")) || !bytes.Contains(svg.Bytes(), []byte("kv usage")) || !bytes.Contains(svg.Bytes(), []byte("waiting")) {
		t.Errorf("SVG lacks the document or a title: %.200s", svg.String())
	}
	if err := WriteStacked(&png, PNG, []*plot.Plot{panel("kv usage")}, 2*vg.Inch, 2*vg.Inch); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("not a PNG: % x", png.Bytes()[:min(8, png.Len())])
	}
	if err := WriteStacked(&png, "pdf", nil, vg.Inch, vg.Inch); err == nil {
		t.Error("pdf: no error")
	}
}
