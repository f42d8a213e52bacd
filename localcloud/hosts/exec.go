package hosts

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// commandTimeout bounds one ip, iptables, unshare or mount command: they change kernel
// state and return at once, so a command still running after this is stuck.
const commandTimeout = 30 * time.Second

// tools are the programs the package runs; Open checks that each is installed.
var tools = []string{"ip", "iptables", "iptables-restore", "nsenter", "unshare", "mount", "sh"}

// run runs a command and returns its standard output. A failure names the command and
// carries its standard error.
func run(ctx context.Context, stdin string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	// Commands get a fixed environment: nothing of the cloud's (its token, a proxy)
	// leaks into them, and their messages are in English for the error text.
	cmd.Env = []string{"PATH=" + defaultPath, "LC_ALL=C"}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.String(), &commandError{cmd: name + " " + strings.Join(args, " "), err: err, stderr: msg}
	}
	return stdout.String(), nil
}

// commandError is a failed command.
type commandError struct {
	cmd    string
	err    error
	stderr string
}

func (e *commandError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("%s: %v", e.cmd, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, e.stderr)
}

func (e *commandError) Unwrap() error { return e.err }

// linkGone reports whether err is ip(8) failing on a link that is not there: "Cannot
// find device" when ip itself looks the name up, "No such device" when the kernel
// answers that it went away after the lookup. A veth goes away asynchronously once the
// namespace holding its peer is deleted, so a teardown meets the second one.
func linkGone(err error) bool {
	return said(err, "Cannot find device", "No such device")
}

// said reports whether err is a failed command whose message contains one of msgs:
// how "already there" and "already gone" are told apart from real failures.
func said(err error, msgs ...string) bool {
	ce, ok := err.(*commandError)
	if !ok {
		return false
	}
	for _, m := range msgs {
		if strings.Contains(ce.stderr, m) {
			return true
		}
	}
	return false
}

// defaultPath is the PATH of every command the package runs and the default PATH of boot
// commands.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookTools reports the first missing tool.
func lookTools() error {
	var missing []string
	for _, t := range tools {
		if _, err := lookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("host instances need %s on %s (Debian: apt-get install iproute2 iptables util-linux)", strings.Join(missing, ", "), defaultPath)
	}
	return nil
}

// lookPath finds a program on defaultPath, whatever the cloud's own PATH is.
func lookPath(name string) (string, error) {
	for _, dir := range strings.Split(defaultPath, ":") {
		p := dir + "/" + name
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on %s", name, defaultPath)
}
