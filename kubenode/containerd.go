package kubenode

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
)

// containerdTemplate is the node's containerd configuration, format version 4
// (containerd 2.2 and later; version 3 is migrated, with a warning at every start). Everything containerd would otherwise share with other nodes on the
// machine is the node's own: root, state, sockets, runc's root, the opt directory, the CNI
// directories; NRI is disabled (its socket is machine-wide).
var containerdTemplate = template.Must(template.New("containerd").Funcs(template.FuncMap{
	"toml": tomlString, "tomlList": tomlList,
}).Parse(`# containerd configuration of node {{.NodeName}}, written by nephele's node runtime at
# every boot: edits are lost.
version = 4
root = {{toml .Paths.ContainerdRoot}}
state = {{toml .Paths.ContainerdState}}
# This file alone: nothing from the machine's /etc/containerd/conf.d (imported by default).
imports = []
# NRI listens on one machine-wide socket (/var/run/nri/nri.sock): off, so nodes do not fight over it.
disabled_plugins = ['io.containerd.nri.v1.nri']

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = {{toml .Paths.ContainerdSocket}}

  [plugins.'io.containerd.server.v1.ttrpc']
    address = {{toml (print .Paths.ContainerdSocket ".ttrpc")}}

  # No debug socket and no metrics listener.
  [plugins.'io.containerd.server.v1.debug']
    address = ''

  [plugins.'io.containerd.server.v1.metrics']
    address = ''

  [plugins.'io.containerd.internal.v1.opt']
    path = {{toml .Paths.ContainerdOpt}}

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

    # The sandbox image: imported, or pulled from a registry the node is given, and never
    # garbage-collected.
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = {{toml .SandboxImage}}

    # Registry settings go in hosts.toml files here, one directory per registry host.
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = {{toml .Paths.RegistryHosts}}

  [plugins.'io.containerd.cri.v1.runtime']
    # The machine may not allow lowering oom_score_adj (no CAP_SYS_RESOURCE): without
    # this, every pod sandbox fails to start (runc: "can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    # Pod network namespaces are mounted under the state directory, not in the machine's
    # /var/run/netns.
    netns_mounts_under_state_dir = true

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'

        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = {{toml .Runc}}
          Root = {{toml .Paths.RuncRoot}}
          # kubelet uses the cgroupfs driver (no systemd on the machine).
          SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = {{tomlList .CNIBinDir}}
      conf_dir = {{toml .Paths.CNIConf}}
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    # Streaming (exec, attach, port-forward) is proxied by kubelet; containerd's own
    # server stays on the node's loopback.
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`))

// renderContainerd renders the node's containerd config.toml.
func renderContainerd(n *Node) ([]byte, error) {
	var buf bytes.Buffer
	err := containerdTemplate.Execute(&buf, map[string]any{
		"NodeName":     n.Config.NodeName,
		"Paths":        n.Paths,
		"SandboxImage": n.Config.SandboxImage,
		"Runc":         n.Binaries.Runc,
		"CNIBinDir":    n.Binaries.CNI,
	})
	if err != nil {
		return nil, fmt.Errorf("render containerd config: %w", err)
	}
	return buf.Bytes(), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlList quotes each string and makes a TOML array of them.
func tomlList(ss ...string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
