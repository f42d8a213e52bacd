package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// maxDatagram is the largest UDP payload.
const maxDatagram = 64 << 10

// udpListener maps each client address to a session: a connected socket to one
// backend, so replies find their way back and one client's datagrams stay on one
// backend. A session ends after the idle timeout.
type udpListener struct {
	p     *Proxy
	lb    string
	pc    *net.UDPConn
	route atomic.Pointer[route]
	rr    atomic.Uint64
	wg    sync.WaitGroup

	mu       sync.Mutex
	sessions map[netip.AddrPort]*udpSession
	closed   bool
}

type udpSession struct {
	client   netip.AddrPort
	backend  netip.AddrPort
	upstream *net.UDPConn
	last     atomic.Int64 // unix nanoseconds of the last datagram either way
}

func (s *udpSession) touch() { s.last.Store(time.Now().UnixNano()) }

func newUDPListener(p *Proxy, lb string, pc *net.UDPConn) *udpListener {
	return &udpListener{p: p, lb: lb, pc: pc, sessions: map[netip.AddrPort]*udpSession{}}
}

// setRoute switches the route and ends sessions to backends that left it, so their
// clients move to a remaining backend with their next datagram.
func (l *udpListener) setRoute(r *route) {
	l.route.Store(r)
	l.mu.Lock()
	var gone []*udpSession
	for _, s := range l.sessions {
		if !r.has(s.backend) {
			gone = append(gone, s)
		}
	}
	l.mu.Unlock()
	for _, s := range gone {
		l.end(s)
	}
}

func (l *udpListener) serve() {
	l.wg.Add(1)
	go l.readLoop()
}

func (l *udpListener) readLoop() {
	defer l.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, src, err := l.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || l.isClosed() {
				return
			}
			continue // e.g. a truncated datagram; the socket is still fine
		}
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		r := l.route.Load()
		if !allowed(r.allow, src.Addr()) {
			l.p.metrics.rejected.WithLabelValues(l.lb, string(UDP), reasonSourceRange).Inc()
			continue
		}
		s := l.session(r, src)
		if s == nil {
			l.p.metrics.rejected.WithLabelValues(l.lb, string(UDP), reasonNoBackend).Inc()
			continue
		}
		s.touch()
		if _, err := s.upstream.Write(buf[:n]); err != nil {
			// The backend refused an earlier datagram (ICMP port unreachable): drop the
			// session so the client's next datagram picks a backend again.
			l.end(s)
		}
	}
}

func (l *udpListener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// session returns the client's session, opening one to the next backend if needed.
func (l *udpListener) session(r *route, client netip.AddrPort) *udpSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if s, ok := l.sessions[client]; ok {
		return s
	}
	for _, t := range r.candidates(r.start(client.Addr(), &l.rr)) {
		up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(t.addr))
		if err != nil {
			l.p.log.V(4).Info("opening a UDP session", "loadbalancer", l.lb, "node", t.node, "err", err.Error())
			continue
		}
		s := &udpSession{client: client, backend: t.addr, upstream: up}
		s.touch()
		l.sessions[client] = s
		l.p.metrics.connections.WithLabelValues(l.lb, string(UDP)).Inc()
		l.wg.Add(1)
		go l.replies(s)
		return s
	}
	return nil
}

// replies sends the backend's datagrams back to the client until the session ends or
// idles out.
func (l *udpListener) replies(s *udpSession) {
	defer l.wg.Done()
	defer l.end(s)
	idle := l.p.cfg.UDPIdleTimeout
	buf := make([]byte, maxDatagram)
	for {
		deadline := time.Unix(0, s.last.Load()).Add(idle)
		if !time.Now().Before(deadline) {
			return
		}
		_ = s.upstream.SetReadDeadline(deadline)
		n, err := s.upstream.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // the loop re-checks the last activity
			}
			return
		}
		s.touch()
		if _, err := l.pc.WriteToUDPAddrPort(buf[:n], s.client); err != nil && l.isClosed() {
			return
		}
	}
}

// end closes a session and forgets it if it is still the client's.
func (l *udpListener) end(s *udpSession) {
	l.mu.Lock()
	if l.sessions[s.client] == s {
		delete(l.sessions, s.client)
	}
	l.mu.Unlock()
	_ = s.upstream.Close()
}

func (l *udpListener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	sessions := make([]*udpSession, 0, len(l.sessions))
	for _, s := range l.sessions {
		sessions = append(sessions, s)
	}
	l.sessions = map[netip.AddrPort]*udpSession{}
	l.mu.Unlock()
	_ = l.pc.Close()
	for _, s := range sessions {
		_ = s.upstream.Close()
	}
	l.wg.Wait()
}
