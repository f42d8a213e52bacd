package dataplane

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// tcpListener forwards each accepted connection to a backend.
type tcpListener struct {
	p      *Proxy
	lb     string
	ln     *net.TCPListener
	ctx    context.Context
	cancel context.CancelFunc
	route  atomic.Pointer[route]
	rr     atomic.Uint64
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newTCPListener(p *Proxy, lb string, ln *net.TCPListener) *tcpListener {
	ctx, cancel := context.WithCancel(p.ctx)
	return &tcpListener{p: p, lb: lb, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
}

func (l *tcpListener) setRoute(r *route) { l.route.Store(r) }

func (l *tcpListener) serve() {
	l.wg.Add(1)
	go l.acceptLoop()
}

func (l *tcpListener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.p.log.Error(err, "accepting a connection", "loadbalancer", l.lb, "retryIn", backoff)
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		if !l.track(c) {
			_ = c.Close()
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.untrack(c)
			l.handle(c)
		}()
	}
}

// track registers a connection so close can end it; false once the listener is closed.
func (l *tcpListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *tcpListener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	_ = c.Close()
}

// refuse resets the client connection, the way a firewall rejecting it would.
func refuse(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

func (l *tcpListener) handle(client *net.TCPConn) {
	r := l.route.Load()
	src := client.RemoteAddr().(*net.TCPAddr).AddrPort()
	if !allowed(r.allow, src.Addr()) {
		l.p.metrics.rejected.WithLabelValues(l.lb, string(TCP), reasonSourceRange).Inc()
		l.p.log.V(4).Info("refused a client outside the source ranges", "loadbalancer", l.lb, "client", src)
		refuse(client)
		return
	}
	upstream := l.dial(r, src.Addr())
	if upstream == nil {
		l.p.metrics.rejected.WithLabelValues(l.lb, string(TCP), reasonNoBackend).Inc()
		refuse(client)
		return
	}
	if !l.track(upstream) {
		_ = upstream.Close()
		return
	}
	defer l.untrack(upstream)
	l.p.metrics.connections.WithLabelValues(l.lb, string(TCP)).Inc()
	pipe(client, upstream)
}

// dial connects to the first candidate backend that answers.
func (l *tcpListener) dial(r *route, client netip.Addr) *net.TCPConn {
	d := net.Dialer{Timeout: l.p.cfg.DialTimeout}
	for _, t := range r.candidates(r.start(client, &l.rr)) {
		c, err := d.DialContext(l.ctx, "tcp", t.addr.String())
		if err == nil {
			return c.(*net.TCPConn)
		}
		if l.ctx.Err() != nil {
			return nil
		}
		l.p.log.V(4).Info("backend did not answer", "loadbalancer", l.lb, "node", t.node, "addr", t.addr, "err", err.Error())
	}
	return nil
}

// pipe copies both ways until both directions are done, passing half-closes on.
func pipe(a, b *net.TCPConn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src *net.TCPConn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.CloseWrite()
		_ = src.CloseRead()
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

func (l *tcpListener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.cancel()
	_ = l.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	l.wg.Wait()
}
