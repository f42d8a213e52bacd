package testnet

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func TestEchoServersSayWhoAnswered(t *testing.T) {
	port := FreePort(t, "tcp", loopback)
	addr := netip.AddrPortFrom(loopback, port)
	if Listening(addr) {
		t.Fatalf("%s is taken before the echo server starts", addr)
	}
	TCPEcho(t, addr, "node-1")
	answer, err := AskTCP(addr, loopback, "hello")
	if err != nil || answer != "node-1 hello" || Tag(answer) != "node-1" {
		t.Errorf("AskTCP = %q, %v; want %q", answer, err, "node-1 hello")
	}
	if !Listening(addr) {
		t.Errorf("Listening(%s) = false with an echo server on it", addr)
	}

	udp := netip.AddrPortFrom(loopback, FreePort(t, "udp", loopback))
	UDPEcho(t, udp, "node-2")
	c := NewUDPClient(t, loopback, udp)
	if answer := c.AskUntil(t, "hi"); answer != "node-2 hi" {
		t.Errorf("AskUntil = %q, want %q", answer, "node-2 hi")
	}
}

func TestLoopbackPrefix(t *testing.T) {
	p := LoopbackPrefix(107)
	if p.Bits() != 24 || p.Addr().As4()[0] != 127 || p.Addr().As4()[1] != 107 || p.Masked() != p {
		t.Errorf("LoopbackPrefix(107) = %s, want a /24 in 127.107.0.0/16", p)
	}
}

func TestFreeNodePortIsANodePort(t *testing.T) {
	if p := FreeNodePort(t, loopback); p < 30000 || p >= 32768 {
		t.Errorf("FreeNodePort = %d, outside [30000, 32768)", p)
	}
}

func TestHealthz(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second}
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		addr := netip.AddrPortFrom(loopback, FreePort(t, "tcp", loopback))
		Healthz(t, addr, status)
		for path, want := range map[string]int{"/healthz": status, "/other": http.StatusNotFound} {
			resp, err := client.Get("http://" + addr.String() + path)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s from a Healthz(%d) = %d, want %d", path, status, resp.StatusCode, want)
			}
		}
	}
}

func TestUDPAskFailsWithoutAServer(t *testing.T) {
	to := netip.AddrPortFrom(loopback, FreePort(t, "udp", loopback))
	c := NewUDPClient(t, loopback, to)
	if answer, err := c.Ask("anyone?", 50*time.Millisecond); err == nil {
		t.Errorf("Ask with no server = %q, want an error", answer)
	}
}

func TestTCPProxy(t *testing.T) {
	echo := netip.AddrPortFrom(loopback, FreePort(t, "tcp", loopback))
	TCPEcho(t, echo, "backend")
	nothing := netip.AddrPortFrom(loopback, FreePort(t, "tcp", loopback))
	tests := []struct {
		name   string
		target netip.AddrPort
		want   string // "" for a connection closed without an answer
	}{
		{"to an echo server", echo, "backend hello"},
		{"to nothing", nothing, ""},
	}
	for _, tt := range tests {
		var proxy netip.AddrPort
		t.Run(tt.name, func(t *testing.T) {
			proxy = TCPProxy(t, netip.AddrPortFrom(loopback, 0), tt.target.String())
			if proxy.Port() == 0 || proxy.Port() == tt.target.Port() {
				t.Fatalf("the proxy listens on %s", proxy)
			}
			answer, err := AskTCP(proxy, netip.Addr{}, "hello")
			if tt.want == "" {
				if err == nil {
					t.Errorf("through a proxy to nothing: %q, want the connection closed", answer)
				}
				return
			}
			if err != nil || answer != tt.want {
				t.Errorf("through the proxy: %q, %v; want %q", answer, err, tt.want)
			}
		})
		if Listening(proxy) {
			t.Errorf("the proxy on %s outlived its test", proxy)
		}
	}
}
