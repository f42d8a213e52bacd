package render

import (
	"fmt"
	"regexp"
	"strings"
)

// OptionError is one option a rendering refuses: which option, the value given and why.
// Validate and Render return every refused option of a set at once, as OptionErrors,
// so a caller that sets options from something else (the operator, from its
// CloudControllerManager's spec) can tell which of its own fields each came from and
// word the message for its users, without parsing text; errors.Is and errors.As reach
// the parser's error behind it through Unwrap.
type OptionError struct {
	// Option is the option's flag of `nephele manifests`, without its dashes:
	// "cluster-cidr".
	Option string
	// Index is the bad item's position in a repeated option (--extra-arg), or -1 when
	// the error is about the option as a whole.
	Index int
	// Value is the value refused: a string, or an int (--replicas), or a bool.
	Value any
	// Reason says what is allowed or how to fix it; empty when Err says it all. It
	// names other options as {option} (flag names without dashes), so that Explain
	// can name them the caller's way.
	Reason string
	// Err is the error of the parser that refused the value, if any.
	Err error
}

// Error is the message `nephele manifests` prints: "invalid value for --flag: value:
// reason", naming options as flags.
func (e *OptionError) Error() string {
	return "invalid value for " + flagName(e.Option) + ": " + e.Explain(flagName)
}

// Unwrap returns the parser's error.
func (e *OptionError) Unwrap() error { return e.Err }

// Explain returns the value and why it is refused, naming each option the reason refers
// to with name (flagName for the command line; the operator names its spec's fields).
func (e *OptionError) Explain(name func(option string) string) string {
	var b strings.Builder
	if s, ok := e.Value.(string); ok {
		fmt.Fprintf(&b, "%q", s)
	} else {
		fmt.Fprintf(&b, "%v", e.Value)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(optionRef.ReplaceAllStringFunc(e.Reason, func(ref string) string { return name(ref[1 : len(ref)-1]) }))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// optionRef is how a Reason names an option: {cluster-cidr}.
var optionRef = regexp.MustCompile(`\{[a-z0-9-]+\}`)

// flagName names an option as `nephele manifests` takes it: --option.
func flagName(option string) string { return "--" + option }

// OptionErrors are the options a rendering refuses, one per problem, in the order of
// Options' fields.
type OptionErrors []*OptionError

// Error is one line per refused option.
func (l OptionErrors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns each OptionError, so that errors.As finds them.
func (l OptionErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}
