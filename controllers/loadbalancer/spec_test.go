package loadbalancer

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/cloud"
)

func TestLoadBalancerName(t *testing.T) {
	tests := []struct {
		uid  types.UID
		want string
	}{
		// Upstream's DefaultLoadBalancerName: "a" + UID without dashes, cut at 32.
		{"0c6f1a2e-5b7d-4e8f-9a0b-1234567890ab", "a0c6f1a2e5b7d4e8f9a0b1234567890a"},
		{"short-uid", "ashortuid"},
		{"", "a"},
	}
	for _, tt := range tests {
		svc := newService("ns", "web")
		svc.UID = tt.uid
		if got := LoadBalancerName(svc); got != tt.want {
			t.Errorf("LoadBalancerName(uid %q) = %q, want %q", tt.uid, got, tt.want)
		}
		if len(LoadBalancerName(svc)) > 32 {
			t.Errorf("LoadBalancerName(uid %q) is longer than 32", tt.uid)
		}
	}
}

func TestWantsLoadBalancer(t *testing.T) {
	tests := []struct {
		name  string
		svc   *corev1.Service
		class string
		want  bool
		// unclassed: the controller serves Services without a class beside class's.
		unclassed bool
	}{
		{"no class, default controller", newService("ns", "a"), "", true, false},
		{"ClusterIP", newService("ns", "a", withType(corev1.ServiceTypeClusterIP)), "", false, false},
		{"NodePort", newService("ns", "a", withType(corev1.ServiceTypeNodePort)), "", false, false},
		{"other class, default controller", newService("ns", "a", withClass("example.com/other")), "", false, false},
		{"our class", newService("ns", "a", withClass("example.com/ours")), "example.com/ours", true, false},
		{"no class, class controller", newService("ns", "a"), "example.com/ours", false, false},
		{"other class, class controller", newService("ns", "a", withClass("example.com/other")), "example.com/ours", false, false},
		{"our class but ClusterIP", newService("ns", "a", withClass("example.com/ours"), withType(corev1.ServiceTypeClusterIP)), "example.com/ours", false, false},
		{"no class, default cloud's controller", newService("ns", "a"), "example.com/ours", true, true},
		{"our class, default cloud's controller", newService("ns", "a", withClass("example.com/ours")), "example.com/ours", true, true},
		{"other class, default cloud's controller", newService("ns", "a", withClass("example.com/other")), "example.com/ours", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wantsLoadBalancer(tt.svc, newClasses(tt.class, tt.unclassed)); got != tt.want {
				t.Errorf("wantsLoadBalancer = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNeedsCleanup(t *testing.T) {
	const ours, other = "example.com/ours", "example.com/other"
	deleting := func(s *corev1.Service) { s.DeletionTimestamp = deletedAt() }
	clusterIP := withType(corev1.ServiceTypeClusterIP)
	tests := []struct {
		name  string
		svc   *corev1.Service
		class string // the controller's
		held  bool   // this process ensured a load balancer for the Service
		// unclassed: the controller serves Services without a class beside class's (the
		// default cloud of a manager serving several).
		unclassed bool
		// want is needsCleanup; moved is movedAway.
		want, moved bool
	}{
		{name: "LoadBalancer with finalizer", svc: newService("ns", "a", withFinalizer())},
		{name: "LoadBalancer without finalizer", svc: newService("ns", "a")},
		{name: "deleted with finalizer", svc: newService("ns", "a", withFinalizer(), deleting), want: true},
		{name: "became ClusterIP with finalizer", svc: newService("ns", "a", withFinalizer(), clusterIP), want: true},
		{name: "became ClusterIP without finalizer", svc: newService("ns", "a", clusterIP)},
		{name: "became ClusterIP, annotated for us", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, ours)), class: ours, want: true},
		{name: "became ClusterIP, annotated for another class", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, other)), class: ours},
		{name: "became ClusterIP, annotated for another class, held here", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, other)), class: ours, held: true, want: true},
		{name: "became ClusterIP, annotated for the default class", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, "")), want: true},
		{name: "became ClusterIP, no annotation, class controller", svc: newService("ns", "a", withFinalizer(), clusterIP), class: ours},
		{name: "became ClusterIP, no annotation, class controller that held it", svc: newService("ns", "a", withFinalizer(), clusterIP), class: ours, held: true, want: true},
		{name: "our class being deleted", svc: newService("ns", "a", withFinalizer(), withClass(ours), deleting), class: ours, want: true},
		{name: "another class with the shared finalizer", svc: newService("ns", "a", withFinalizer(), withClass(other))},
		{name: "another class being deleted", svc: newService("ns", "a", withFinalizer(), withClass(other), deleting)},
		{name: "no class, seen by a class controller", svc: newService("ns", "a", withFinalizer()), class: ours},
		{name: "another class now, held here", svc: newService("ns", "a", withFinalizer(), withClass(other)), held: true, moved: true},
		{name: "another class now, annotated for us", svc: newService("ns", "a", withFinalizer(), withClass(other), withAnnotation(ClassAnnotation, ours)), class: ours, moved: true},
		{name: "no class now, annotated for us", svc: newService("ns", "a", withFinalizer(), withAnnotation(ClassAnnotation, ours)), class: ours, moved: true},
		{name: "no class, default cloud's controller", svc: newService("ns", "a", withFinalizer(), withAnnotation(ClassAnnotation, ours)), class: ours, unclassed: true},
		{name: "became ClusterIP, no annotation, default cloud's controller", svc: newService("ns", "a", withFinalizer(), clusterIP), class: ours, unclassed: true, want: true},
		{name: "became ClusterIP, annotated for the default class, default cloud's controller", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, "")), class: ours, unclassed: true, want: true},
		{name: "became ClusterIP, annotated for another class, default cloud's controller", svc: newService("ns", "a", withFinalizer(), clusterIP, withAnnotation(ClassAnnotation, other)), class: ours, unclassed: true},
		{name: "another class now, annotated for the default cloud", svc: newService("ns", "a", withFinalizer(), withClass(other), withAnnotation(ClassAnnotation, ours)), class: ours, unclassed: true, moved: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsCleanup(tt.svc, newClasses(tt.class, tt.unclassed), tt.held); got != tt.want {
				t.Errorf("needsCleanup = %v, want %v", got, tt.want)
			}
			if got := movedAway(tt.svc, newClasses(tt.class, tt.unclassed), tt.held); got != tt.moved {
				t.Errorf("movedAway = %v, want %v", got, tt.moved)
			}
		})
	}
}

func TestBuildSpec(t *testing.T) {
	tests := []struct {
		name string
		svc  *corev1.Service
		want func(*cloud.LoadBalancerSpec)
	}{
		{
			name: "defaults",
			svc:  newService("ns", "web"),
			want: func(*cloud.LoadBalancerSpec) {},
		},
		{
			name: "Local traffic keeps the health check port",
			svc:  newService("ns", "web", withLocalTraffic(32000)),
			want: func(s *cloud.LoadBalancerSpec) {
				s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.HealthCheckNodePort = 32000
			},
		},
		{
			name: "Cluster traffic drops a stale health check port",
			svc: newService("ns", "web", func(s *corev1.Service) {
				s.Spec.HealthCheckNodePort = 32000
			}),
			want: func(*cloud.LoadBalancerSpec) {},
		},
		{
			name: "empty traffic policy means Cluster",
			svc:  newService("ns", "web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "" }),
			want: func(*cloud.LoadBalancerSpec) {},
		},
		{
			name: "ports keep protocol and node port, empty protocol is TCP",
			svc:  newService("ns", "web", withPort("dns", corev1.ProtocolUDP, 53, 30053), withPort("raw", "", 9000, 30900)),
			want: func(s *cloud.LoadBalancerSpec) {
				s.Ports = append(s.Ports,
					cloud.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
					cloud.LoadBalancerPort{Name: "raw", Protocol: corev1.ProtocolTCP, Port: 9000, NodePort: 30900})
			},
		},
		{
			name: "ports keep target port and app protocol",
			svc:  newService("ns", "web", withTargetPort(intstr.FromString("http")), withAppProtocol("kubernetes.io/h2c")),
			want: func(s *cloud.LoadBalancerSpec) {
				s.Ports[0].TargetPort = intstr.FromString("http")
				s.Ports[0].AppProtocol = "kubernetes.io/h2c"
			},
		},
		{
			name: "source ranges are parsed and masked",
			svc:  newService("ns", "web", withSourceRanges("203.0.113.0/24", " 10.1.2.3/8", "2001:db8::/32")),
			want: func(s *cloud.LoadBalancerSpec) {
				s.SourceRanges = []netip.Prefix{
					netip.MustParsePrefix("203.0.113.0/24"),
					netip.MustParsePrefix("10.0.0.0/8"),
					netip.MustParsePrefix("2001:db8::/32"),
				}
			},
		},
		{
			name: "source ranges from the annotation when the field is empty",
			svc:  newService("ns", "web", withAnnotation(sourceRangesAnnotation, "192.0.2.0/24, 198.51.100.0/24")),
			want: func(s *cloud.LoadBalancerSpec) {
				s.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")}
			},
		},
		{
			name: "the field wins over the annotation",
			svc:  newService("ns", "web", withSourceRanges("203.0.113.0/24"), withAnnotation(sourceRangesAnnotation, "not a range")),
			want: func(s *cloud.LoadBalancerSpec) {
				s.SourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
			},
		},
		{
			name: "ClientIP affinity with its timeout",
			svc: newService("ns", "web", func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](125)}}
			}),
			want: func(s *cloud.LoadBalancerSpec) {
				s.SessionAffinity, s.SessionAffinityTimeout = corev1.ServiceAffinityClientIP, 125*time.Second
			},
		},
		{
			name: "ClientIP affinity without a timeout has Kubernetes' default",
			svc:  newService("ns", "web", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
			want: func(s *cloud.LoadBalancerSpec) {
				s.SessionAffinity, s.SessionAffinityTimeout = corev1.ServiceAffinityClientIP, 10800*time.Second
			},
		},
		{
			name: "a timeout without ClientIP affinity means nothing",
			svc: newService("ns", "web", func(s *corev1.Service) {
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](125)}}
			}),
			want: func(*cloud.LoadBalancerSpec) {},
		},
		{
			name: "dual stack and requested IP",
			svc: newService("ns", "web", func(s *corev1.Service) {
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
				s.Spec.LoadBalancerIP = "192.0.2.10"
			}),
			want: func(s *cloud.LoadBalancerSpec) {
				s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
				s.RequestedIP = "192.0.2.10"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &cloud.LoadBalancerSpec{
				Name:                  LoadBalancerName(tt.svc),
				ClusterName:           "prod",
				Service:               types.NamespacedName{Namespace: "ns", Name: "web"},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				SessionAffinity:       corev1.ServiceAffinityNone,
				IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
				Ports:                 []cloud.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
			}
			tt.want(want)
			got, err := buildSpec(tt.svc, "prod")
			if err != nil {
				t.Fatalf("buildSpec: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("buildSpec =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestBuildSpecBadSourceRange(t *testing.T) {
	for _, svc := range []*corev1.Service{
		newService("ns", "web", withSourceRanges("203.0.113.0/24", "10.0.0.0/33")),
		newService("ns", "web", withSourceRanges("everywhere")),
		newService("ns", "web", withAnnotation(sourceRangesAnnotation, "10.0.0.0/8,bogus")),
	} {
		_, err := buildSpec(svc, "prod")
		var sre *SourceRangeError
		if !errors.As(err, &sre) {
			t.Errorf("buildSpec(%v, annotations %v) error = %v, want a *SourceRangeError", svc.Spec.LoadBalancerSourceRanges, svc.Annotations, err)
		}
		// Deleting must work whatever the Service says.
		if spec := cleanupSpec(svc, "prod"); spec.Name != LoadBalancerName(svc) || spec.Service.Name != "web" {
			t.Errorf("cleanupSpec = %+v, want name and Service set", spec)
		}
	}
}

func TestSpecKey(t *testing.T) {
	base := newService("ns", "web")
	key := func(svc *corev1.Service, backends ...cloud.Backend) string {
		t.Helper()
		spec, err := buildSpec(svc, "prod")
		if err != nil {
			t.Fatal(err)
		}
		spec.Backends = backends
		k := specKey(spec, svc)
		if spec.Backends == nil && backends != nil {
			t.Fatal("specKey dropped the spec's backends")
		}
		return k
	}
	k0 := key(base)
	if !specUnchanged(k0, key(base.DeepCopy(), cloud.Backend{NodeName: "n1"})) {
		t.Error("backends changed the spec key: a node change would cost a full ensure")
	}
	if specUnchanged("", "") {
		t.Error("an empty key must never count as unchanged")
	}
	changes := map[string]*corev1.Service{
		"annotation":    newService("ns", "web", withAnnotation("example.com/lb-size", "large")),
		"port":          newService("ns", "web", withPort("https", corev1.ProtocolTCP, 443, 30443)),
		"source ranges": newService("ns", "web", withSourceRanges("10.0.0.0/8")),
		"traffic":       newService("ns", "web", withLocalTraffic(32000)),
		"uid":           func() *corev1.Service { s := base.DeepCopy(); s.UID = "other"; return s }(),
		"affinity": newService("ns", "web", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}),
		// Upstream's portEqualForLB compares both (k/k#112785): providers derive health
		// probes from the app protocol and may forward to the target port.
		"target port":  newService("ns", "web", withTargetPort(intstr.FromInt32(8080))),
		"app protocol": newService("ns", "web", withAppProtocol("kubernetes.io/h2c")),
	}
	for what, svc := range changes {
		if specUnchanged(k0, key(svc)) {
			t.Errorf("changing the %s kept the spec key: the load balancer would not be ensured again", what)
		}
	}
}
