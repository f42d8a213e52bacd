// Package results holds what one benchmark run measured, as written to and read from
// the JSON files under bench/results/. The harness fills a Run per configuration (row);
// the report reads every Run of a scale and puts the rows side by side.
package results
