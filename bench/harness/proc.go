package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/controlplane"
)

// controller is a running controller process, one of the control plane env's processes
// so that stopping the env stops it too.
type controller struct {
	*controlplane.Process
	statsURL string
	hc       *http.Client
}

// startController starts a controller process for row with flags and waits until its
// statistics endpoint answers.
func startController(ctx context.Context, cp *controlplane.Env, command func(ccm.Impl, []string) *exec.Cmd, row Row, flags []string) (*controller, error) {
	addrFile := filepath.Join(cp.Dir, "ccm-stats.addr")
	_ = os.Remove(addrFile)
	args := append([]string{"--impl=" + string(row.Impl), "--stats-addr-file=" + addrFile, "--"}, flags...)
	p, err := cp.StartCommand("ccm-"+row.Name, command(row.Impl, args))
	if err != nil {
		return nil, fmt.Errorf("starting the controller process: %w", err)
	}
	c := &controller{Process: p, hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			if _, _, err := net.SplitHostPort(string(b)); err == nil {
				c.statsURL = "http://" + string(b) + "/stats"
				return c, nil
			}
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("the controller process exited at start (%v); log %s:\n%s", p.Err(), p.LogPath(), p.LogTail(20))
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), p.Stop())
		case <-deadline.C:
			return nil, errors.Join(errors.New("the controller process did not start its statistics endpoint within a minute"), p.Stop())
		case <-tick.C:
		}
	}
}

// exited reports whether the process has exited, and how.
func (c *controller) exited() (bool, error) {
	select {
	case <-c.Done():
		return true, c.Err()
	default:
		return false, nil
	}
}

// stats reads the process's own memory statistics.
func (c *controller) stats(ctx context.Context) (ccm.Stats, error) {
	var s ccm.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.statsURL, nil)
	if err != nil {
		return s, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return s, fmt.Errorf("reading the controller's statistics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("reading the controller's statistics: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("decoding the controller's statistics: %w", err)
	}
	return s, nil
}

// procStatus is what /proc/PID/status and /proc/PID/stat say of the process.
type procStatus struct {
	RSS, PeakRSS uint64 // bytes
	CPUSeconds   float64
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// readProc reads the process's resident set and CPU time from /proc.
func (c *controller) readProc() (procStatus, error) {
	var ps procStatus
	pid := c.Pid()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, fmt.Errorf("reading the controller's memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) < 1 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			ps.RSS = n << 10
		case "VmHWM":
			ps.PeakRSS = n << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, fmt.Errorf("reading the controller's CPU time: %w", err)
	}
	// The command name may hold spaces; the fields after it are fixed.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
		f := strings.Fields(string(stat)[i+1:])
		// utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
		if len(f) > 12 {
			u, _ := strconv.ParseUint(f[11], 10, 64)
			s, _ := strconv.ParseUint(f[12], 10, 64)
			ps.CPUSeconds = float64(u+s) / clockTicks
		}
	}
	return ps, nil
}

// memorySampler samples the controller's resident set every interval until stopped.
type memorySampler struct {
	start  time.Time
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	points []rssPoint
}

type rssPoint struct {
	t   time.Duration
	rss uint64
}

func sampleMemory(c *controller, interval time.Duration) *memorySampler {
	m := &memorySampler{start: time.Now(), stopCh: make(chan struct{})}
	m.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if ps, err := c.readProc(); err == nil {
				m.mu.Lock()
				m.points = append(m.points, rssPoint{t: time.Since(m.start), rss: ps.RSS})
				m.mu.Unlock()
			}
			select {
			case <-m.stopCh:
				return
			case <-t.C:
			}
		}
	})
	return m
}

func (m *memorySampler) stop() []rssPoint {
	close(m.stopCh)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.points
}
