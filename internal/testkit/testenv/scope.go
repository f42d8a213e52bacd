package testenv

import (
	"context"
	"crypto/rand"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// maxScopeID keeps "<id>-<name>" Node names and the label value short enough for the
// 63-character limit of label values with room for a test's own suffix.
const maxScopeID = 30

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// Scope is one test's share of a control plane that several tests use: an ID made from
// the test's name, a label its objects carry, an informer factory that sees only objects
// with that label, and an event broadcaster writing Events to the apiserver, so a
// controller under test sees its own Nodes and nobody else's. When the test ends the
// factory and broadcaster stop and the Nodes carrying the label are deleted; register the
// Scope before the controller's own cleanup so that the controller stops first.
type Scope struct {
	// ID is unique per test and usable in object names and label values.
	ID string
	// LabelKey is the key of the label that marks the test's objects; its value is ID.
	LabelKey string
	// Informers sees only objects labelled LabelKey=ID. Start it once the controller's
	// informers are registered, with a stop channel that closes before the Scope's
	// cleanup runs (a cleanup registered after NewScope), or the cleanup waits forever.
	Informers informers.SharedInformerFactory

	client      kubernetes.Interface
	broadcaster record.EventBroadcaster
}

// NewScope returns the Scope of test t on client (a real or a fake clientset).
func NewScope(t testing.TB, client kubernetes.Interface, labelKey string) *Scope {
	t.Helper()
	// A random suffix keeps two runs of one test (-count=2) and tests whose names share
	// a long prefix apart.
	suffix := strings.ToLower(rand.Text()[:6])
	name := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if max := maxScopeID - len(suffix) - len("t--"); len(name) > max {
		name = strings.TrimRight(name[:max], "-")
	}
	id := "t-" + name + "-" + suffix
	if name == "" {
		id = "t-" + suffix
	}
	s := &Scope{ID: id, LabelKey: labelKey, client: client}
	s.Informers = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = s.Selector()
	}))
	s.broadcaster = record.NewBroadcaster()
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(func() {
		s.Informers.Shutdown()
		s.broadcaster.Shutdown()
		err := client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: s.Selector()})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the nodes of %s: %v", id, err)
		}
	})
	return s
}

// Selector is the label selector of the test's objects.
func (s *Scope) Selector() string { return s.LabelKey + "=" + s.ID }

// Labels returns the label set that puts an object in the scope.
func (s *Scope) Labels() map[string]string { return map[string]string{s.LabelKey: s.ID} }

// Recorder returns an EventRecorder that writes Events from component to the apiserver.
func (s *Scope) Recorder(component string) record.EventRecorder {
	return s.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}
