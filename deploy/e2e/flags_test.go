package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// documentedFlags reads docs/deploy.md's table "Component flags for an external CCM":
// for each component, the flags a row requires. A row whose flags cell begins with
// "optionally" or "nothing" requires none; a flag with a <placeholder> value is required
// by name.
func documentedFlags(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "## Component flags for an external CCM")
	if !ok {
		t.Fatal(`docs/deploy.md has no section "## Component flags for an external CCM"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	flag := regexp.MustCompile("--[a-z0-9-]+(=[^ `]*)?")
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 {
			continue
		}
		component, flags := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if component == "component" || strings.HasPrefix(component, "---") {
			continue
		}
		if _, seen := out[component]; !seen {
			out[component] = nil
		}
		if strings.HasPrefix(flags, "optionally") || strings.HasPrefix(flags, "nothing") {
			continue
		}
		for _, f := range flag.FindAllString(flags, -1) {
			if strings.Contains(f, "=<") || strings.HasSuffix(f, "=") {
				f, _, _ = strings.Cut(f, "=")
			}
			out[component] = append(out[component], f)
		}
	}
	for _, c := range []string{"kubelet", "kube-controller-manager", "kube-apiserver"} {
		if _, ok := out[c]; !ok {
			t.Fatalf("docs/deploy.md's component flags table has no row for %s", c)
		}
	}
	return out
}

// cmdline reads a process's arguments as flags: "--name=value" or "--name" (a value
// given as the next argument is joined to it).
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")[1:]
	var flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			a += "=" + args[i+1]
			i++
		}
		flags = append(flags, a)
	}
	return flags
}

// hasFlag reports whether flags has want: exactly, or by name when want has no value.
func hasFlag(flags []string, want string) bool {
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		if f == want || !strings.Contains(want, "=") && name == want {
			return true
		}
	}
	return false
}

// componentFlags checks that the cluster runs kube-apiserver, kube-controller-manager
// and every kubelet with exactly the flags docs/deploy.md prescribes for an external
// CCM, and kube-apiserver without a --cloud-provider.
func (e *inCluster) componentFlags(t *testing.T) {
	docs := documentedFlags(t)
	running := map[string][][]string{}
	for _, p := range e.c.Env.Processes() {
		switch p.Name() {
		case "kube-apiserver", "kube-controller-manager":
			running[p.Name()] = append(running[p.Name()], cmdline(t, p.Pid()))
		}
	}
	for _, n := range e.c.Nodes {
		st, err := e.c.NodeStatus(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		running["kubelet"] = append(running["kubelet"], cmdline(t, st.PIDs["kubelet"]))
	}
	for component, want := range docs {
		procs := running[component]
		if len(procs) == 0 {
			t.Errorf("no %s process runs", component)
			continue
		}
		for i, flags := range procs {
			for _, f := range want {
				if !hasFlag(flags, f) {
					t.Errorf("%s #%d runs without %s, which docs/deploy.md prescribes; its flags: %s", component, i+1, f, strings.Join(flags, " "))
				}
			}
		}
		t.Logf("%s: %s (as documented)", component, strings.Join(want, " "))
	}
	for _, flags := range running["kube-apiserver"] {
		if hasFlag(flags, "--cloud-provider") {
			t.Errorf("kube-apiserver runs with --cloud-provider; docs/deploy.md says it needs nothing")
		}
	}
}
