package handover

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name          string
		command, args []string
		want          Args
	}{
		{"flags with =", []string{"kube-controller-manager", "--cloud-provider=gce", "--v=2"}, nil,
			Args{{"cloud-provider", "gce"}, {"v", "2"}}},
		{"separate values and booleans", []string{"/bin/ccm"}, []string{"--cloud-config", "/etc/c.conf", "--leader-elect", "--controllers=*,-route"},
			Args{{"cloud-config", "/etc/c.conf"}, {"leader-elect", "true"}, {"controllers", "*,-route"}}},
		{"single dash", []string{"ccm", "-v", "4"}, nil, Args{{"v", "4"}}},
		{"through a shell", []string{"/bin/sh", "-c"}, []string{"exec /usr/local/bin/kube-controller-manager --cloud-provider=aws --enable-leader-migration"},
			Args{{"cloud-provider", "aws"}, {"enable-leader-migration", "true"}}},
		{"nothing", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseArgs(tt.command, tt.args); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseArgs = %v, want %v", got, tt.want)
			}
		})
	}
	a := Args{{"v", "2"}, {"v", "4"}}
	if v, ok := a.Get("v"); !ok || v != "4" {
		t.Errorf("Get of a repeated flag = %q, %v; want the last, 4", v, ok)
	}
	if _, ok := a.Get("x"); ok {
		t.Error("Get of an absent flag found it")
	}
}

func TestImageVersionAndName(t *testing.T) {
	tests := []struct{ image, version, name string }{
		{"registry.k8s.io/kube-controller-manager:v1.30.2", "v1.30.2", "kube-controller-manager"},
		{"registry.k8s.io/provider-aws/cloud-controller-manager:v1.29.0@sha256:abc", "v1.29.0", "cloud-controller-manager"},
		{"localhost:5000/nephele/cloud-controller-manager", "", "cloud-controller-manager"},
		{"example.com/ccm:latest", "", "ccm"},
	}
	for _, tt := range tests {
		if got := imageVersion(tt.image); got != tt.version {
			t.Errorf("imageVersion(%q) = %q, want %q", tt.image, got, tt.version)
		}
		if got := imageName(tt.image); got != tt.name {
			t.Errorf("imageName(%q) = %q, want %q", tt.image, got, tt.name)
		}
	}
}

func TestComponentKind(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		c      corev1.Container
		want   ComponentKind
	}{
		{"kubeadm static pod", map[string]string{"component": "kube-controller-manager"}, corev1.Container{Name: "kcm", Image: "k8s/kcm:v1"}, KubeControllerManager},
		{"by command", nil, corev1.Container{Name: "main", Image: "x", Command: []string{"/usr/bin/kube-apiserver"}}, KubeAPIServer},
		{"provider ccm image", nil, corev1.Container{Name: "c", Image: "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.30.0"}, CloudControllerManager},
		{"unrelated", map[string]string{"k8s-app": "kube-dns"}, corev1.Container{Name: "coredns", Image: "coredns:1.11"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := componentKind(tt.labels, tt.c)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("componentKind = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

func TestLeaseHeld(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		l    Lease
		want bool
	}{
		{Lease{Holder: "a", RenewTime: now.Add(-14 * time.Second), Duration: 15 * time.Second}, true},
		{Lease{Holder: "a", RenewTime: now.Add(-15 * time.Second), Duration: 15 * time.Second}, false},
		{Lease{Holder: "", RenewTime: now, Duration: 15 * time.Second}, false},
		{Lease{Holder: "a", Duration: 15 * time.Second}, false},
	}
	for i, tt := range tests {
		if got := tt.l.Held(now); got != tt.want {
			t.Errorf("%d: Held = %v, want %v", i, got, tt.want)
		}
	}
}

func TestMovingControllers(t *testing.T) {
	specs := controllers.Default()
	tests := []struct {
		name     string
		kind     ComponentKind
		version  string
		disabled []string
		want     map[string]string // nephele -> old
	}{
		{"current kube-controller-manager", KubeControllerManager, "v1.30.2", nil, map[string]string{
			manager.CloudNodeController: "", manager.CloudNodeLifecycleController: "cloud-node-lifecycle-controller",
			manager.ServiceLBController: "service-lb-controller", manager.NodeRouteController: "node-route-controller"}},
		{"kube-controller-manager before v1.28", KubeControllerManager, "v1.27.9", nil, map[string]string{
			manager.CloudNodeController: "", manager.CloudNodeLifecycleController: "cloud-node-lifecycle",
			manager.ServiceLBController: "service", manager.NodeRouteController: "route"}},
		{"unknown version reads as current", CloudControllerManager, "", nil, map[string]string{
			manager.CloudNodeController: "cloud-node-controller", manager.CloudNodeLifecycleController: "cloud-node-lifecycle-controller",
			manager.ServiceLBController: "service-lb-controller", manager.NodeRouteController: "node-route-controller"}},
		{"routes off in the old component", CloudControllerManager, "v1.26.0", []string{manager.NodeRouteController}, map[string]string{
			manager.CloudNodeController: "cloud-node", manager.CloudNodeLifecycleController: "cloud-node-lifecycle",
			manager.ServiceLBController: "service"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := movingControllers(tt.kind, tt.version, specs, tt.disabled)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for _, c := range got {
				m[c.Nephele] = c.Old
			}
			if !reflect.DeepEqual(m, tt.want) {
				t.Errorf("moving = %v, want %v", m, tt.want)
			}
		})
	}
}

func TestDisabledByControllersFlag(t *testing.T) {
	specs := controllers.Default()
	tests := []struct {
		value string
		want  []string
	}{
		{"", nil},
		{"*", nil},
		{"*,-route", []string{manager.NodeRouteController}},
		{"*,-service-lb-controller,-cloud-node-lifecycle", []string{manager.CloudNodeLifecycleController, manager.ServiceLBController}},
		{"cloud-node,service", []string{manager.CloudNodeLifecycleController, manager.NodeRouteController}},
		{"*,-bootstrapsigner,-tokencleaner", nil}, // kube-controller-manager's own controllers do not matter
	}
	for _, tt := range tests {
		if got := disabledByControllersFlag(tt.value, specs); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("disabledByControllersFlag(%q) = %v, want %v", tt.value, got, tt.want)
		}
	}
}
