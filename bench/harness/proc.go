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
	"syscall"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
)

// controller is a running controller process.
type controller struct {
	cmd      *exec.Cmd
	logPath  string
	statsURL string
	hc       *http.Client

	done    chan struct{}
	waitErr error
	log     *os.File
}

// startController starts a controller process for row with flags and waits until its
// statistics endpoint answers.
func startController(ctx context.Context, command func(ccm.Impl, []string) *exec.Cmd, dir string, row Row, flags []string) (*controller, error) {
	addrFile := filepath.Join(dir, "ccm-stats.addr")
	_ = os.Remove(addrFile)
	args := append([]string{"--impl=" + string(row.Impl), "--stats-addr-file=" + addrFile, "--"}, flags...)
	logPath := filepath.Join(dir, "ccm-"+row.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controller log: %w", err)
	}
	cmd := command(row.Impl, args)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that stopping it stops anything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the controller process: %w", err)
	}
	c := &controller{cmd: cmd, logPath: logPath, log: logFile, done: make(chan struct{}),
		hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
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
		case <-c.done:
			return nil, fmt.Errorf("the controller process exited at start (%v); log %s:\n%s", c.waitErr, logPath, tail(logPath, 20))
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), c.stop())
		case <-deadline.C:
			return nil, errors.Join(errors.New("the controller process did not start its statistics endpoint within a minute"), c.stop())
		case <-tick.C:
		}
	}
}

// exited reports whether the process has exited, and how.
func (c *controller) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to 20s, then kills the process group.
func (c *controller) stop() error {
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-c.done:
		return fmt.Errorf("the controller process did not stop within 20s of SIGTERM and was killed")
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the controller process %d did not exit after SIGKILL", pid)
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
	pid := c.cmd.Process.Pid
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

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
