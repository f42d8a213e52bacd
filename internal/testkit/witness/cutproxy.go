package witness

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// CutProxy forwards TCP connections to a target until it is cut: then it drops every
// connection it carries and holds new ones open without answering, as a network
// partition does, until it is healed. It is how one replica loses the apiserver while
// the others, and the cloud, stay reachable.
type CutProxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// NewCutProxy starts a proxy on the loopback to target ("host:port"); it is closed,
// with every connection, when the test ends.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for the proxy to %s: %v", target, err)
	}
	p := &CutProxy{target: target, ln: ln, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

// track adds c to the connections the proxy closes on a cut and at the end; it
// returns false (having closed c) when the proxy is cut and held is false.
func (p *CutProxy) track(c net.Conn, held bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut && !held {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *CutProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *CutProxy) serve(in net.Conn) {
	defer p.untrack(in)
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if !p.track(in, true) {
		return
	}
	if cut {
		// Blackholed: read and drop until healed (Heal closes it) or the test ends.
		_, _ = io.Copy(io.Discard, in)
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(out, false) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
	_ = in.Close()
	_ = out.Close()
	<-done
}

// Cut drops every connection and blackholes new ones.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal forwards again; the connections held while cut are closed, so that their
// clients dial anew.
func (p *CutProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.conns {
		_ = c.Close()
	}
}

// KubeconfigThrough writes a copy of the kubeconfig at path whose clusters are reached
// through p, and returns the copy's path.
func (p *CutProxy) KubeconfigThrough(t testing.TB, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatalf("reading kubeconfig %s: %v", path, err)
	}
	for name, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatalf("kubeconfig %s: cluster %s: %v", path, name, err)
		}
		u.Host = p.ln.Addr().String()
		c.Server = u.String()
	}
	out := filepath.Join(t.TempDir(), "kubeconfig-through-proxy")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatalf("writing kubeconfig %s: %v", out, err)
	}
	return out
}
