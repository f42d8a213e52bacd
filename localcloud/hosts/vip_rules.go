package hosts

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"math"
	"net/netip"
	"strings"
)

// vipPlan renders the load balancer data plane's mangle rules; vip.go describes them.
type vipPlan struct {
	v      *vipRecord
	bridge string
	// rng is the instance range, whose offsets are the hosts' marks.
	rng netip.Prefix
}

// hashName returns a short name for key, unique per machine (key names the bridge):
// iptables chains have at most 28 characters.
func hashName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// lbChain is the chain of load balancer name.
func (p vipPlan) lbChain(name string) string { return "NEPHELE-LB-" + hashName(p.bridge+"/"+name) }

// recentName is the recent list of the clients load balancer name sent to host a.
func (p vipPlan) recentName(name string, a netip.Addr) string {
	return fmt.Sprintf("nephele-%s-%08x", strings.ToLower(hashName(p.bridge + "/" + name))[:12], addrNum(a))
}

// markOf is the mark of host a, whose address the caller checked.
func (p vipPlan) markOf(a netip.Addr) uint32 {
	m, _ := vipMark(p.rng, a)
	return m
}

func (p vipPlan) mark(v uint32) string { return fmt.Sprintf("%#x/%#x", v, p.v.Mask) }

// topHead is the start of the top chain: replies the machine sends itself (a reset, an
// ICMP error from a VIP) are for the source address, which is in the pool.
func (p vipPlan) topHead() string {
	return fmt.Sprintf("-A %s -d %s -j RETURN\n", p.v.MangleChain, p.v.Source)
}

// topTail is the end of the top chain (its head and tail are all there is before the
// first SetLoadBalancers): what no listener took gets the reject mark.
func (p vipPlan) topTail() string {
	return fmt.Sprintf("-A %s -m mark --mark %s -j MARK --set-xmark %s\n", p.v.MangleChain, p.mark(0), p.mark(p.v.RejectMark))
}

// render returns the iptables-restore input making the top chain and every load
// balancer's chain exactly lbs (sorted by name, checked), and deleting the chains of
// stale, load balancers gone.
func (p vipPlan) render(lbs []LoadBalancer, stale []string) string {
	var b strings.Builder
	top := p.v.MangleChain
	b.WriteString("*mangle\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", top)
	for _, lb := range lbs {
		fmt.Fprintf(&b, ":%s - [0:0]\n", p.lbChain(lb.Name))
	}
	for _, c := range stale {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	b.WriteString(p.topHead())
	for _, lb := range lbs {
		chain := p.lbChain(lb.Name)
		for _, port := range lb.Ports {
			match := fmt.Sprintf("-A %s -d %s/32 -p %s -m %[3]s --dport %d", top, lb.VIP, port.Protocol, port.Port)
			if len(lb.SourceRanges) == 0 {
				fmt.Fprintf(&b, "%s -j %s\n", match, chain)
			}
			for _, r := range lb.SourceRanges {
				fmt.Fprintf(&b, "%s -s %s -j %s\n", match, r.Masked(), chain)
			}
		}
	}
	b.WriteString(p.topTail())
	for _, lb := range lbs {
		p.renderLB(&b, lb)
	}
	for _, c := range stale {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// renderLB writes one load balancer's chain.
func (p vipPlan) renderLB(b *strings.Builder, lb LoadBalancer) {
	c := p.lbChain(lb.Name)
	zero := p.mark(0)
	fmt.Fprintf(b, "-A %s -j CONNMARK --restore-mark --nfmask %#x --ctmask %#x\n", c, p.v.Mask, p.v.Mask)
	// A connection already on one of the load balancer's hosts stays there, healthy or
	// not (it drains); one whose host left starts over.
	for _, a := range lb.Backends {
		fmt.Fprintf(b, "-A %s -m mark --mark %s -j RETURN\n", c, p.mark(p.markOf(a)))
	}
	fmt.Fprintf(b, "-A %s -j MARK --set-xmark %s\n", c, zero)
	// Only a new TCP connection may get a host: a packet of one whose host left would be
	// reset by any other host; it is refused here instead. A UDP flow simply moves.
	fmt.Fprintf(b, "-A %s -p tcp -m conntrack ! --ctstate NEW -j RETURN\n", c)
	if len(lb.Targets) == 0 {
		return
	}
	// recent counts in whole seconds: a timeout is rounded up.
	seconds := int64(math.Ceil(lb.AffinityTimeout.Seconds()))
	if lb.AffinityTimeout > 0 {
		for _, a := range lb.Targets {
			fmt.Fprintf(b, "-A %s -m mark --mark %s -m recent --name %s --rcheck --seconds %d --reap --rsource -j MARK --set-xmark %s\n",
				c, zero, p.recentName(lb.Name, a), seconds, p.mark(p.markOf(a)))
		}
	}
	n := len(lb.Targets)
	for i, a := range lb.Targets {
		if i < n-1 {
			fmt.Fprintf(b, "-A %s -m mark --mark %s -m statistic --mode random --probability %0.10f -j MARK --set-xmark %s\n",
				c, zero, 1/float64(n-i), p.mark(p.markOf(a)))
		} else {
			fmt.Fprintf(b, "-A %s -m mark --mark %s -j MARK --set-xmark %s\n", c, zero, p.mark(p.markOf(a)))
		}
	}
	if lb.AffinityTimeout > 0 {
		for _, a := range lb.Targets {
			fmt.Fprintf(b, "-A %s -m mark --mark %s -m recent --name %s --set --rsource\n", c, p.mark(p.markOf(a)), p.recentName(lb.Name, a))
		}
	}
	fmt.Fprintf(b, "-A %s -j CONNMARK --save-mark --nfmask %#x --ctmask %#x\n", c, p.v.Mask, p.v.Mask)
}
