package api

import (
	"strings"
	"testing"
)

func hostSpec(mutate ...func(*InstanceSpec)) InstanceSpec {
	s := InstanceSpec{
		Name:         "node-1",
		Kind:         InstanceHost,
		Addresses:    []Address{{Type: AddressExternalIP, Address: "192.0.2.5"}},
		BootCommand:  []string{"/usr/local/bin/node-boot", "--verbose"},
		Env:          map[string]string{"NODE_ROLE": "worker", "_x1": ""},
		PrivatePaths: []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/run/containerd"},
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func TestInstanceSpecValidateHost(t *testing.T) {
	tests := []struct {
		name  string
		spec  InstanceSpec
		field string
	}{
		{name: "valid host", spec: hostSpec()},
		{name: "host with only a boot command", spec: InstanceSpec{Name: "n", Kind: InstanceHost, BootCommand: []string{"sleep", "1"}}},
		{name: "explicit record", spec: instanceSpec(func(s *InstanceSpec) { s.Kind = InstanceRecord })},
		{name: "unknown kind", spec: hostSpec(func(s *InstanceSpec) { s.Kind = "vm" }), field: "spec.kind"},
		{name: "upper-case kind", spec: hostSpec(func(s *InstanceSpec) { s.Kind = "Host" }), field: "spec.kind"},
		{name: "boot command on a record", spec: instanceSpec(func(s *InstanceSpec) { s.BootCommand = []string{"sleep"} }), field: "spec.bootCommand"},
		{name: "env on a record", spec: instanceSpec(func(s *InstanceSpec) { s.Env = map[string]string{"A": "b"} }), field: "spec.env"},
		{name: "private paths on a record", spec: instanceSpec(func(s *InstanceSpec) { s.PrivatePaths = []string{"/var/lib/kubelet"} }), field: "spec.privatePaths"},
		{name: "host without boot command", spec: hostSpec(func(s *InstanceSpec) { s.BootCommand = nil }), field: "spec.bootCommand"},
		{name: "empty program", spec: hostSpec(func(s *InstanceSpec) { s.BootCommand = []string{"", "x"} }), field: "spec.bootCommand[0]"},
		{name: "NUL in an argument", spec: hostSpec(func(s *InstanceSpec) { s.BootCommand[1] = "a\x00b" }), field: "spec.bootCommand[1]"},
		{name: "boot command too big", spec: hostSpec(func(s *InstanceSpec) { s.BootCommand[1] = strings.Repeat("x", 200<<10) }), field: "spec.bootCommand"},
		{name: "host with an InternalIP", spec: hostSpec(func(s *InstanceSpec) {
			s.Addresses = append(s.Addresses, Address{Type: AddressInternalIP, Address: "10.88.0.9"})
		}), field: "spec.addresses[1].type"},
		{name: "bad env name", spec: hostSpec(func(s *InstanceSpec) { s.Env["1X"] = "y" }), field: `spec.env["1X"]`},
		{name: "env name with a dash", spec: hostSpec(func(s *InstanceSpec) { s.Env["A-B"] = "y" }), field: `spec.env["A-B"]`},
		{name: "reserved env name", spec: hostSpec(func(s *InstanceSpec) { s.Env["NEPHELE_HOST_DIR"] = "/x" }), field: `spec.env["NEPHELE_HOST_DIR"]`},
		{name: "NUL in an env value", spec: hostSpec(func(s *InstanceSpec) { s.Env["A"] = "\x00" }), field: `spec.env["A"]`},
		{name: "relative private path", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[1] = "var/lib" }), field: "spec.privatePaths[1]"},
		{name: "unclean private path", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[2] = "/var/lib/../cni" }), field: "spec.privatePaths[2]"},
		{name: "trailing slash", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[0] = "/var/lib/kubelet/" }), field: "spec.privatePaths[0]"},
		{name: "root as private path", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[3] = "/" }), field: "spec.privatePaths[3]"},
		{name: "private path in /proc", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[0] = "/proc/sys" }), field: "spec.privatePaths[0]"},
		{name: "private /sys", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[0] = "/sys" }), field: "spec.privatePaths[0]"},
		{name: "duplicate private path", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[3] = "/var/lib/kubelet" }), field: "spec.privatePaths[3]"},
		{name: "/devices is not /dev", spec: hostSpec(func(s *InstanceSpec) { s.PrivatePaths[0] = "/devices" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantField(t, tt.spec.Validate(), tt.field) })
	}
}
