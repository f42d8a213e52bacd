// Package report turns the JSON results of one scale into report.md: a table per
// scenario with nephele, upstream tuned and upstream defaults side by side and the ratio
// of each upstream row to nephele, whether nephele met each target, and PNG charts of
// the timelines. A hand-written notes.md next to the results is included as the
// report's analysis, so regenerating the report keeps it.
package report
