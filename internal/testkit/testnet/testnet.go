package testnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// LoopbackPrefix returns a random /24 inside 127.second.0.0/16, for a test's VIP pool or
// node addresses: test binaries running at the same time rarely share addresses when
// each kind of test picks its own second octet.
func LoopbackPrefix(second byte) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, second, byte(rand.IntN(256)), 0}), 24)
}

// FreePort returns a port in [20000, 60000) that is free for network ("tcp" or "udp")
// on every one of addrs at the time of the call.
func FreePort(t testing.TB, network string, addrs ...netip.Addr) uint16 {
	t.Helper()
	return freePortIn(t, network, 20000, 60000, addrs)
}

// FreeNodePort returns a port in Kubernetes' default node port range [30000, 32768)
// that is free for TCP on every one of addrs at the time of the call, for a Service
// whose node port a test serves itself.
func FreeNodePort(t testing.TB, addrs ...netip.Addr) uint16 {
	t.Helper()
	return freePortIn(t, "tcp", 30000, 32768, addrs)
}

func freePortIn(t testing.TB, network string, lo, hi int, addrs []netip.Addr) uint16 {
	t.Helper()
	for range 500 {
		port := uint16(lo + rand.IntN(hi-lo))
		ok := true
		var closers []func()
		for _, a := range addrs {
			ap := netip.AddrPortFrom(a, port).String()
			if network == "udp" {
				pc, err := net.ListenPacket("udp", ap)
				if err != nil {
					ok = false
					break
				}
				closers = append(closers, func() { _ = pc.Close() })
			} else {
				ln, err := net.Listen("tcp", ap)
				if err != nil {
					ok = false
					break
				}
				closers = append(closers, func() { _ = ln.Close() })
			}
		}
		for _, c := range closers {
			c()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no free %s port in [%d, %d) on %v", network, lo, hi, addrs)
	return 0
}

// TCPEcho serves addr until the test ends, answering each line with "tag line".
func TCPEcho(t testing.TB, addr netip.AddrPort, tag string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	serveTCP(t, ln, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(c, "%s %s", tag, line); err != nil {
				return
			}
		}
	})
}

// TCPProxy forwards every connection to listen (port 0 for any free one) to target
// ("host:port") until the test ends, and returns the address it listens on: for a
// program in a network namespace of its own to reach a server that listens on the
// machine's loopback only.
func TCPProxy(t testing.TB, listen netip.AddrPort, target string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", listen.String())
	if err != nil {
		t.Fatalf("listening on %s to proxy to %s: %v", listen, target, err)
	}
	serveTCP(t, ln, func(in net.Conn) {
		out, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			return
		}
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
		go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
		// When either side ends, so does the other.
		<-done
		_ = out.Close()
		_ = in.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// serveTCP accepts connections on ln until the test ends and runs handle for each on a
// goroutine of its own. At the end it closes the listener and every connection still
// open, and waits for the handlers to return.
func serveTCP(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	closed := false
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				// Accepted as the test ended: no handler would be stopped.
				mu.Unlock()
				_ = c.Close()
				return
			}
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				handle(c)
			}()
		}
	}()
}

// UDPEcho serves addr until the test ends, answering each datagram with "tag payload".
func UDPEcho(t testing.TB, addr netip.AddrPort, tag string) {
	t.Helper()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatalf("listening on udp %s: %v", addr, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteToUDPAddrPort([]byte(tag+" "+string(buf[:n])), from)
		}
	}()
}

// Healthz serves GET /healthz on addr with status until the test ends, like
// kube-proxy's health check node port. It returns the status it answers, which the test
// may change (a node turning unhealthy).
func Healthz(t testing.TB, addr netip.AddrPort, status int) *atomic.Int32 {
	t.Helper()
	var st atomic.Int32
	st.Store(int32(status))
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(st.Load()))
	}), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return &st
}

// Tag returns the backend tag an echo answer starts with.
func Tag(answer string) string {
	tag, _, _ := strings.Cut(answer, " ")
	return tag
}

// AnswerTimeout bounds how long AskTCP waits for its connection and answer: generous,
// so that load never fails a test.
const AnswerTimeout = 30 * time.Second

// AskTCP connects to addr from local (any source when local is the zero Addr), sends
// msg and returns the answer line without its newline.
func AskTCP(addr netip.AddrPort, local netip.Addr, msg string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(AnswerTimeout))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// Listening reports whether something listens for TCP connections on addr. A
// connection reset counts as listening: a load balancer without a backend accepts and
// resets at once, sometimes before connect returns.
func Listening(addr netip.AddrPort) bool {
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	_ = c.Close()
	return true
}

// UDPClient is a UDP socket bound to a source address and connected to a target.
type UDPClient struct{ *net.UDPConn }

// NewUDPClient returns a client sending from local to to; it closes with the test.
func NewUDPClient(t testing.TB, local netip.Addr, to netip.AddrPort) UDPClient {
	t.Helper()
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: local.AsSlice()}, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatalf("udp client from %s: %v", local, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return UDPClient{c}
}

// Ask sends msg and waits up to wait for one answer.
func (c UDPClient) Ask(msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// AskUntil repeats Ask until an answer comes (UDP has no connection to wait for).
func (c UDPClient) AskUntil(t testing.TB, msg string) string {
	t.Helper()
	var answer string
	poll.Eventually(t, "a UDP answer to "+msg, func() error {
		var err error
		answer, err = c.Ask(msg, 500*time.Millisecond)
		return err
	})
	return answer
}

// IsTimeout reports whether err is a network timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
