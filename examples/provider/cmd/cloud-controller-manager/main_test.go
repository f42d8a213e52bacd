package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asMain makes the test binary run main, so the tests run the real command.
const asMain = "EXAMPLE_CCM_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestHelpNamesTheProvider(t *testing.T) {
	code, out := run(t, "--help")
	if code != 0 || !strings.Contains(out, "Cloud providers in this binary: [example]") || !strings.Contains(out, "--cloud-config") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
}

func TestBadCloudConfigFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	config, kubeconfig := filepath.Join(dir, "cloud.json"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(config, []byte(`{"region": "ex-1", "zone": "a"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A kubeconfig for an apiserver that is not there: the manager reads the cloud
	// config before it talks to the apiserver.
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := run(t, "--cloud-provider=example", "--cloud-config="+config, "--kubeconfig="+kubeconfig, "--secure-port=0")
	if code == 0 || !strings.Contains(out, `unknown field "zone"`) {
		t.Errorf("a bad cloud config: exit %d, want non-zero naming the field:\n%s", code, out)
	}
}
