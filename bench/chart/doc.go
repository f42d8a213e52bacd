// Package chart draws the report's line charts as PNG images, in plain Go: axes with
// round tick values, one colored line per series and a legend. It is small on purpose;
// the benchmarks need "count over time, one line per configuration" and nothing more.
package chart
