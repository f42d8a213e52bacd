package eventlog

import (
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestLog(t *testing.T) {
	var l Log
	l.Eventf(node("n1"), corev1.EventTypeNormal, "Synced", "node %s synced", "n1")
	l.Event(service("default", "web"), corev1.EventTypeWarning, "SyncLoadBalancerFailed", "boom")
	l.AnnotatedEventf(node("n2"), map[string]string{"a": "b"}, corev1.EventTypeNormal, "Synced", "node %s synced", "n2")
	l.Event(&corev1.NodeList{}, corev1.EventTypeNormal, "Listed", "odd object")

	tests := []struct {
		name string
		got  any
		want any
	}{
		{"find node", l.Find("n1", "Synced"), []Event{{Object: "n1", Type: "Normal", Reason: "Synced", Message: "node n1 synced"}}},
		{"find namespaced", len(l.Find("default/web", "SyncLoadBalancerFailed")), 1},
		{"find other reason", len(l.Find("n1", "SyncLoadBalancerFailed")), 0},
		{"reasons", l.Reasons("default/web"), []string{"SyncLoadBalancerFailed"}},
		{"count", l.Count("Synced"), 2},
		{"objects", l.Objects("Synced"), []string{"n1", "n2"}},
		{"no metadata", l.Objects("Listed"), []string{"*v1.NodeList"}},
		{"all", len(l.Events()), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch want := tt.want.(type) {
			case []Event:
				if !slices.Equal(tt.got.([]Event), want) {
					t.Errorf("got %v, want %v", tt.got, want)
				}
			case []string:
				if !slices.Equal(tt.got.([]string), want) {
					t.Errorf("got %q, want %q", tt.got, want)
				}
			default:
				if tt.got != tt.want {
					t.Errorf("got %v, want %v", tt.got, tt.want)
				}
			}
		})
	}
	if got, want := l.String(), "n1 Normal Synced: node n1 synced\ndefault/web Warning SyncLoadBalancerFailed: boom\nn2 Normal Synced: node n2 synced\n*v1.NodeList Normal Listed: odd object\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLogConcurrent(t *testing.T) {
	var l Log
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Event(node("n"), corev1.EventTypeNormal, "R", "m")
				_ = l.Count("R")
			}
		})
	}
	wg.Wait()
	if got := l.Count("R"); got != 800 {
		t.Errorf("Count = %d, want 800", got)
	}
}
