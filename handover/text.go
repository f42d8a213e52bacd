package handover

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// textWidth is where WriteText wraps prose.
const textWidth = 100

// WriteText writes the runbook for a person to follow.
func (r *Runbook) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.line("Move: %s", r.Move)
	if r.Why != "" {
		p.wrap("  ", "because "+r.Why)
	}
	p.line("")
	p.line("The cluster now")
	for _, o := range r.Observed {
		p.wrap("  ", o)
	}
	if len(r.Findings) > 0 {
		p.line("")
		p.line("Before you start")
		for _, f := range r.Findings {
			tag := "note    "
			if f.Blocking {
				tag = "BLOCKING"
			}
			p.wrap("  "+tag+" ", f.Object+": "+f.Text)
		}
	}
	p.line("")
	p.line("Controllers that change hands")
	old := "kube-controller-manager"
	if r.Move.From == FromCloudControllerManager {
		old = "old cloud-controller-manager"
	}
	tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\tnephele\tnephele also answers to\n", old)
	for _, c := range r.Controllers {
		o := c.Old
		if o == "" {
			o = "(none: nephele runs it under its own lease)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", o, c.Nephele, strings.Join(c.Aliases, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, s := range r.Steps {
		p.line("")
		p.line("Step %d. %s", i+1, s.Title)
		p.wrap("  ", s.Why)
		for _, c := range s.Changes {
			p.line("  %s:", c.Component)
			for _, f := range c.Add {
				p.line("    add     %s", f)
			}
			for _, f := range c.Remove {
				p.line("    remove  %s", f)
			}
			for _, d := range c.Do {
				p.wrap("    do      ", d)
			}
		}
		for _, f := range s.Files {
			p.line("  %s:", f.Path)
			for _, l := range strings.Split(strings.TrimRight(f.Content, "\n"), "\n") {
				p.line("    %s", l)
			}
		}
		p.line("  check:")
		for _, e := range s.Check.Expect {
			p.wrap("    - ", e)
		}
		for _, c := range s.Check.Commands {
			p.line("    $ %s", c)
		}
	}
	return p.err
}

// WriteText writes the status as two tables: the leases, and nephele's controllers.
func (s *Status) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tHOLDER\tRENEWED\tSTATE\tBELONGS TO")
	for _, l := range s.Leases {
		holder, renewed, state := l.Holder, "-", "held"
		if holder == "" {
			holder, state = "-", "released"
		} else if !l.Held {
			state = "stale"
		}
		if !l.RenewTime.IsZero() {
			renewed = age(s.Time.Sub(l.RenewTime)) + " ago"
		}
		belongs := l.Role
		if l.Role == "migration" {
			belongs = "migration: held by "
			switch {
			case l.Holder == "":
				belongs += "nobody"
			case l.HeldBy == "":
				belongs += "a component whose main lease is not here"
			default:
				belongs += l.HeldBy
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.String(), holder, renewed, state, belongs)
	}
	fmt.Fprintln(tw, "")
	fmt.Fprintln(tw, "CONTROLLER\tUNDER LEASE\tRUN BY")
	for _, c := range s.Controllers {
		by := "nobody (the lease is not held)"
		if c.RunBy != "" {
			by = c.RunBy + " (" + c.Holder + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Lease, by)
	}
	return tw.Flush()
}

// WriteText writes one line per check: "ok" lines for the checks that passed, and a
// "FAIL" line per failed object with what to do.
func (v *Verdict) WriteText(w io.Writer) error {
	p := &printer{w: w}
	for _, r := range v.Results {
		if r.OK {
			p.line("ok    %s: %s", r.Object, r.Text)
		}
	}
	for _, r := range v.Failed() {
		p.line("FAIL  %s: %s; fix: %s", r.Object, r.Text, r.Fix)
	}
	if f := len(v.Failed()); f > 0 {
		p.line("%d failed", f)
	} else {
		p.line("passed")
	}
	return p.err
}

// printer writes lines, keeping the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(p, format+"\n", args...)
}

// wrap writes text after prefix, wrapped at textWidth, continuation lines indented to
// the prefix's width.
func (p *printer) wrap(prefix, text string) {
	indent := strings.Repeat(" ", len(prefix))
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > textWidth {
			p.line("%s", line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	p.line("%s", line)
}
