package kubenode

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Phases of a node, in the order a boot goes through them.
const (
	PhasePreparing   = "Preparing"         // namespaces, mounts, cgroups, configuration
	PhaseImages      = "ImportingImages"   // containerd is up; the images are being imported
	PhaseWaitingCIDR = "WaitingForPodCIDR" // kubelet is up; the Node has no pod CIDR yet
	PhaseRunning     = "Running"           // the CNI is configured and kube-proxy runs
	PhaseStopping    = "Stopping"
	PhaseStopped     = "Stopped"
)

// Status is what the runtime reports in Paths.Status (JSON), rewritten at every change:
// for `nephele up`'s progress, for tests, and for a person looking at a host.
type Status struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Phase is where the node is (Phase*).
	Phase string `json:"phase"`
	// PodCIDR is the Node's pod CIDR, once known.
	PodCIDR string `json:"podCIDR,omitempty"`
	// PIDs are the process IDs of the runtime and its components, by name.
	PIDs map[string]int `json:"pids,omitempty"`
	// Restarts counts the restarts of each component.
	Restarts map[string]int `json:"restarts,omitempty"`
	// Started is when the runtime began booting.
	Started time.Time `json:"started"`
	// Steps are how long after Started each step was done: containerdReady,
	// imagesImported, kubeletStarted, podCIDR, proxyStarted.
	Steps map[string]Duration `json:"steps,omitempty"`
	// Error is why the boot failed, if it did.
	Error string `json:"error,omitempty"`
}

// Duration is a time.Duration written as a string such as "1.234s".
type Duration time.Duration

// MarshalJSON writes d like time.Duration.String.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON wrote.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ReadStatus reads a node's status file.
func ReadStatus(path string) (*Status, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read node status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("node status %s: %w", path, err)
	}
	return &s, nil
}

// write writes s to path atomically.
func (s *Status) write(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node status: %w", err)
	}
	return File{Path: path, Data: append(data, '\n'), Mode: 0o644}.write()
}
