package hosts

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestVIPRules renders the load balancer data plane's mangle rules for a machine with
// instance range 10.88.0.0/16 and VIP pool 10.89.0.0/16 on bridge nephele0.
func TestVIPRules(t *testing.T) {
	rng, pool := netip.MustParsePrefix("10.88.0.0/16"), netip.MustParsePrefix("10.89.0.0/16")
	v := &vipRecord{
		Pool: pool.String(), Source: "10.89.255.254/32", Mask: vipMarkMask, RejectMark: 1 << vipMarkShift,
		MangleChain: mangleChainName("nephele0"), FilterChain: filterChainName("nephele0"),
	}
	plan := vipPlan{v: v, bridge: "nephele0", rng: rng}
	a2, a3, a4 := netip.MustParseAddr("10.88.0.2"), netip.MustParseAddr("10.88.0.3"), netip.MustParseAddr("10.88.1.4")
	vip := netip.MustParseAddr("10.89.0.1")
	web := LoadBalancer{Name: "web", VIP: vip, Ports: []LoadBalancerPort{{ProtocolTCP, 80}, {ProtocolUDP, 53}},
		Backends: []netip.Addr{a2, a3, a4}, Targets: []netip.Addr{a2, a3, a4}}
	chain := plan.lbChain("web")
	// Every load balancer's chain starts alike: restore the connection's host, keep a
	// current one, start over otherwise, but only for new TCP connections.
	head := `-A C -j CONNMARK --restore-mark --nfmask 0xffff0000 --ctmask 0xffff0000
-A C -m mark --mark 0x20000/0xffff0000 -j RETURN
-A C -m mark --mark 0x30000/0xffff0000 -j RETURN
-A C -m mark --mark 0x1040000/0xffff0000 -j RETURN
-A C -j MARK --set-xmark 0x0/0xffff0000
-A C -p tcp -m conntrack ! --ctstate NEW -j RETURN
`
	top := `-A NEPHELE-LB-nephele0 -d 10.89.255.254/32 -j RETURN
-A NEPHELE-LB-nephele0 -d 10.89.0.1/32 -p tcp -m tcp --dport 80 -j C
-A NEPHELE-LB-nephele0 -d 10.89.0.1/32 -p udp -m udp --dport 53 -j C
`
	tail := "-A NEPHELE-LB-nephele0 -m mark --mark 0x0/0xffff0000 -j MARK --set-xmark 0x10000/0xffff0000\n"
	save := "-A C -j CONNMARK --save-mark --nfmask 0xffff0000 --ctmask 0xffff0000\n"
	tests := []struct {
		name  string
		lbs   []LoadBalancer
		stale []string
		want  string
	}{
		{
			name: "no load balancers: everything for the pool is refused",
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n-A NEPHELE-LB-nephele0 -d 10.89.255.254/32 -j RETURN\n" + tail + "COMMIT\n",
		},
		{
			name: "three targets: spread at random, a third each",
			lbs:  []LoadBalancer{web},
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n:C - [0:0]\n" + top + tail + head +
				`-A C -m mark --mark 0x0/0xffff0000 -m statistic --mode random --probability 0.3333333333 -j MARK --set-xmark 0x20000/0xffff0000
-A C -m mark --mark 0x0/0xffff0000 -m statistic --mode random --probability 0.5000000000 -j MARK --set-xmark 0x30000/0xffff0000
-A C -m mark --mark 0x0/0xffff0000 -j MARK --set-xmark 0x1040000/0xffff0000
` + save + "COMMIT\n",
		},
		{
			name: "ClientIP affinity: a client seen within the timeout goes back to its host",
			lbs: []LoadBalancer{func() LoadBalancer {
				lb := web
				lb.Targets = []netip.Addr{a2, a4}
				lb.AffinityTimeout = 10800 * time.Second
				return lb
			}()},
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n:C - [0:0]\n" + top + tail + head +
				`-A C -m mark --mark 0x0/0xffff0000 -m recent --name R2 --rcheck --seconds 10800 --reap --rsource -j MARK --set-xmark 0x20000/0xffff0000
-A C -m mark --mark 0x0/0xffff0000 -m recent --name R4 --rcheck --seconds 10800 --reap --rsource -j MARK --set-xmark 0x1040000/0xffff0000
-A C -m mark --mark 0x0/0xffff0000 -m statistic --mode random --probability 0.5000000000 -j MARK --set-xmark 0x20000/0xffff0000
-A C -m mark --mark 0x0/0xffff0000 -j MARK --set-xmark 0x1040000/0xffff0000
-A C -m mark --mark 0x20000/0xffff0000 -m recent --name R2 --set --rsource
-A C -m mark --mark 0x1040000/0xffff0000 -m recent --name R4 --set --rsource
` + save + "COMMIT\n",
		},
		{
			name: "no target: connections on the hosts stay, new ones are refused",
			lbs: []LoadBalancer{func() LoadBalancer {
				lb := web
				lb.Targets = nil
				return lb
			}()},
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n:C - [0:0]\n" + top + tail + head + "COMMIT\n",
		},
		{
			name: "source ranges: one jump per range, others fall through to the reject mark",
			lbs: []LoadBalancer{func() LoadBalancer {
				lb := web
				lb.Ports = lb.Ports[:1]
				lb.Backends, lb.Targets = []netip.Addr{a2}, []netip.Addr{a2}
				lb.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.244.1.7/32"), netip.MustParsePrefix("192.0.2.9/24")}
				return lb
			}()},
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n:C - [0:0]\n" +
				`-A NEPHELE-LB-nephele0 -d 10.89.255.254/32 -j RETURN
-A NEPHELE-LB-nephele0 -d 10.89.0.1/32 -p tcp -m tcp --dport 80 -s 10.244.1.7/32 -j C
-A NEPHELE-LB-nephele0 -d 10.89.0.1/32 -p tcp -m tcp --dport 80 -s 192.0.2.0/24 -j C
` + tail +
				`-A C -j CONNMARK --restore-mark --nfmask 0xffff0000 --ctmask 0xffff0000
-A C -m mark --mark 0x20000/0xffff0000 -j RETURN
-A C -j MARK --set-xmark 0x0/0xffff0000
-A C -p tcp -m conntrack ! --ctstate NEW -j RETURN
-A C -m mark --mark 0x0/0xffff0000 -j MARK --set-xmark 0x20000/0xffff0000
` + save + "COMMIT\n",
		},
		{
			name:  "a load balancer gone: its chain is flushed and deleted in the same transaction",
			stale: []string{"NEPHELE-LB-OLD"},
			want: "*mangle\n:NEPHELE-LB-nephele0 - [0:0]\n:NEPHELE-LB-OLD - [0:0]\n-A NEPHELE-LB-nephele0 -d 10.89.255.254/32 -j RETURN\n" + tail +
				"-X NEPHELE-LB-OLD\nCOMMIT\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.render(tt.lbs, tt.stale)
			// Hashed names, spelled out once here.
			got = strings.NewReplacer(chain, "C", plan.recentName("web", a2), "R2", plan.recentName("web", a4), "R4").Replace(got)
			if got != tt.want {
				t.Errorf("render:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestVIPNames checks what the kernel limits: chain names of at most 28 characters,
// unique per bridge and load balancer, and the marks and source address of a pool.
func TestVIPNames(t *testing.T) {
	long := vipPlan{bridge: "abcdefghijklmno"}
	if c := long.lbChain("a-very-long-load-balancer-name-" + strings.Repeat("x", 200)); len(c) > 28 {
		t.Errorf("chain %q has %d characters", c, len(c))
	}
	if c := mangleChainName("abcdefghijklmno"); len(c) > 28 {
		t.Errorf("chain %q has %d characters", c, len(c))
	}
	if c := filterChainName("abcdefghijklmno"); len(c) > 28 {
		t.Errorf("chain %q has %d characters", c, len(c))
	}
	if a, b := (vipPlan{bridge: "br0"}).lbChain("web"), (vipPlan{bridge: "br1"}).lbChain("web"); a == b {
		t.Errorf("two bridges' load balancers share chain %s", a)
	}
	tests := []struct {
		rng, addr string
		mark      uint32
		ok        bool
	}{
		{"10.88.0.0/16", "10.88.0.2", 0x20000, true},
		{"10.88.0.0/16", "10.88.255.254", 0xfffe0000, true},
		{"10.88.0.0/16", "10.89.0.2", 0, false},
		{"10.88.0.0/16", "10.88.0.0", 0, false},
		{"10.0.0.0/8", "10.1.0.0", 0, false}, // beyond the mark's 16 bits
		{"10.86.7.0/24", "10.86.7.3", 0x30000, true},
	}
	for _, tt := range tests {
		got, ok := vipMark(netip.MustParsePrefix(tt.rng), netip.MustParseAddr(tt.addr))
		if got != tt.mark || ok != tt.ok {
			t.Errorf("vipMark(%s, %s) = %#x, %v; want %#x, %v", tt.rng, tt.addr, got, ok, tt.mark, tt.ok)
		}
	}
	for pool, want := range map[string]string{"10.89.0.0/16": "10.89.255.254", "10.87.3.0/24": "10.87.3.254", "10.87.3.4/30": "10.87.3.6"} {
		if got := VIPSource(netip.MustParsePrefix(pool)); got.String() != want {
			t.Errorf("VIPSource(%s) = %s, want %s", pool, got, want)
		}
	}
}
