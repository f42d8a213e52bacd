package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// listenerKind is what a listener answers.
type listenerKind int

const (
	kindHTTP   listenerKind = iota // a TCP node port: HTTP hello
	kindEcho                       // a UDP node port: echo
	kindHealth                     // a health check node port: /healthz
)

func (k listenerKind) String() string {
	switch k {
	case kindHTTP:
		return "tcp"
	case kindEcho:
		return "udp"
	case kindHealth:
		return "healthz"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// listenerKey identifies one listener: one socket on one node's address.
type listenerKey struct {
	Node string
	Addr netip.AddrPort
	Kind listenerKind
}

// answer is what a listener says about itself; it changes without reopening the socket
// when a Service's port is renamed or renumbered behind the same node port.
type answer struct {
	Node        string
	Namespace   string
	Service     string
	Port        string // the Service port's name, may be empty
	ServicePort int32
}

func (a answer) hello() string {
	port := fmt.Sprint(a.ServicePort)
	if a.Port != "" {
		port = a.Port + " (" + port + ")"
	}
	return fmt.Sprintf("hello from %s (nephele node agent): service %s/%s port %s\n", a.Node, a.Namespace, a.Service, port)
}

// healthAnswer is the body of kube-proxy's health check node port.
type healthAnswer struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// listener is one open socket and the goroutine serving it, which close ends.
type listener struct {
	info    atomic.Pointer[answer]
	closeFn func() error
	done    chan struct{}
	once    sync.Once
}

func (l *listener) setInfo(a answer) { l.info.Store(&a) }

// close closes the socket and waits for its server goroutine to end.
func (l *listener) close() {
	l.once.Do(func() {
		_ = l.closeFn()
		<-l.done
	})
}

// openListener opens the socket for k and starts serving it.
func openListener(ctx context.Context, k listenerKey, info answer) (*listener, error) {
	l := &listener{done: make(chan struct{})}
	l.setInfo(info)
	var lc net.ListenConfig
	switch k.Kind {
	case kindHTTP, kindHealth:
		ln, err := lc.Listen(ctx, "tcp", k.Addr.String())
		if err != nil {
			return nil, fmt.Errorf("listen on %s for node %s: %w", k.Addr, k.Node, err)
		}
		handler := l.helloHandler()
		if k.Kind == kindHealth {
			handler = l.healthHandler()
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		l.closeFn = srv.Close
		go func() {
			defer close(l.done)
			_ = srv.Serve(ln) // ends with ErrServerClosed when close is called
		}()
	case kindEcho:
		pc, err := lc.ListenPacket(ctx, "udp", k.Addr.String())
		if err != nil {
			return nil, fmt.Errorf("listen on %s/udp for node %s: %w", k.Addr, k.Node, err)
		}
		l.closeFn = pc.Close
		go func() {
			defer close(l.done)
			echo(pc)
		}()
	default:
		return nil, fmt.Errorf("unknown listener kind %v", k.Kind)
	}
	return l, nil
}

func (l *listener) helloHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		info := l.info.Load()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Nephele-Node", info.Node)
		_, _ = fmt.Fprint(w, info.hello())
	})
}

func (l *listener) healthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		info := l.info.Load()
		var body healthAnswer
		body.Service.Namespace, body.Service.Name = info.Namespace, info.Service
		// The stand-in workload runs on every node, so every node has a local endpoint.
		body.LocalEndpoints, body.ServiceProxyHealthy = 1, true
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}

// echo answers every datagram with itself until the socket is closed.
func echo(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient read error (e.g. ICMP unreachable) ends nothing
		}
		_, _ = pc.WriteTo(buf[:n], from)
	}
}
