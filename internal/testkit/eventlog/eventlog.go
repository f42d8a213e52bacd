package eventlog

import (
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Event is one recorded Event.
type Event struct {
	// Object is "namespace/name" for a namespaced object, "name" for a cluster-scoped one
	// and the Go type for anything without object metadata.
	Object string
	// Type is Normal or Warning.
	Type    string
	Reason  string
	Message string
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s: %s", e.Object, e.Type, e.Reason, e.Message)
}

// Log is a record.EventRecorder that keeps every Event. The zero value is ready to use and
// safe for concurrent use.
type Log struct {
	mu     sync.Mutex
	events []Event
}

var _ record.EventRecorder = (*Log)(nil)

// Event records an Event about obj.
func (l *Log) Event(obj runtime.Object, eventtype, reason, message string) {
	e := Event{Object: objectName(obj), Type: eventtype, Reason: reason, Message: message}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// Eventf records an Event about obj with a formatted message.
func (l *Log) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf records an Event about obj; the annotations are not kept.
func (l *Log) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	l.Eventf(obj, eventtype, reason, format, args...)
}

// Events returns every Event recorded so far, in order.
func (l *Log) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Find returns the Events about object with reason, in order.
func (l *Log) Find(object, reason string) []Event {
	var out []Event
	for _, e := range l.Events() {
		if e.Object == object && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// Reasons returns the reasons of the Events about object, in order.
func (l *Log) Reasons(object string) []string {
	var out []string
	for _, e := range l.Events() {
		if e.Object == object {
			out = append(out, e.Reason)
		}
	}
	return out
}

// Count returns how many Events have reason, whatever their object.
func (l *Log) Count(reason string) int {
	n := 0
	for _, e := range l.Events() {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// Objects returns the objects of the Events with reason, in order.
func (l *Log) Objects(reason string) []string {
	var out []string
	for _, e := range l.Events() {
		if e.Reason == reason {
			out = append(out, e.Object)
		}
	}
	return out
}

// String lists every Event, one per line, for test failure messages.
func (l *Log) String() string {
	var b strings.Builder
	for _, e := range l.Events() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func objectName(obj runtime.Object) string {
	m, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Sprintf("%T", obj)
	}
	if ns := m.GetNamespace(); ns != "" {
		return ns + "/" + m.GetName()
	}
	return m.GetName()
}
