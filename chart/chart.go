// Package chart writes the pictures of a run (simulate's and loadtest's
// --plot): time-series panels drawn with gonum/plot, stacked one above the
// other in one SVG or PNG, the format chosen by the file's extension.
package chart

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The formats a picture is written in.
const (
	SVG = "svg"
	PNG = "png"
)

// FormatOf is the format a file name asks for by its extension.
func FormatOf(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	}
	return "", fmt.Errorf("%s: name an .svg or .png file", name)
}

// WriteStacked draws panels one above the other, their x axes aligned, on
// a width × height page and writes it to w in format.
func WriteStacked(w io.Writer, format string, panels []*plot.Plot, width, height vg.Length) error {
	var c draw.Canvas
	var out io.WriterTo
	switch format {
	case SVG:
		sc := vgsvg.New(width, height)
		c, out = draw.New(sc), sc
	case PNG:
		ic := vgimg.New(width, height)
		c, out = draw.New(ic), vgimg.PngCanvas{Canvas: ic}
	default:
		return fmt.Errorf("plot format %q: use svg or png", format)
	}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(grid, tiles, c)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	_, err := out.WriteTo(w)
	return err
}
