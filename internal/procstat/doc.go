// Package procstat reads a process's status line, /proc/<pid>/stat (proc(5)): its state,
// its parent and its start time.
//
// The node runtime (kubenode) walks its ancestors with it, to tell whether it runs in a
// host's namespaces and to spare them when it kills what a node left; the local cloud's
// hosts tell a boot process from a later one that reuses its PID by the start time. The
// line's second field, the command name, is in parentheses and may hold spaces and ')',
// so the fields are counted from the last ')': Parse is the one place that does it.
//
// ByInnerPID maps the PIDs a local cloud host reports (its own PID namespace) to the
// machine's, from the NSpid line of /proc/<pid>/status.
//
// Only Linux has the file; elsewhere Read fails, and Parse works on any input.
package procstat
