package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nephele-dev/nephele/internal/logcap"
)

// bootLogName is the boot log's name in a host's directory.
const bootLogName = "boot.log"

// logCheck is how often the boot logs are trimmed to Config.MaxLogSize.
const logCheck = 5 * time.Second

// bootScript runs as the boot process, PID 1 of a PID namespace of the host's own: it
// joins the host's cgroups (so that nothing it starts can escape a stop; $$ is 1 there,
// which the kernel reads in the writer's namespace, so itself), then enters the host's
// namespaces with nsenter — never `ip netns exec`, which remounts /sys and hides the
// cgroup file systems — and becomes the host's init (initScript). The process keeps its
// PID throughout.
const bootScript = `set -e
net=$1 mnt=$2 uts=$3 wd=$4 init=$5
shift 5
while [ "$1" != "--" ]; do echo $$ > "$1"; shift; done
shift
exec nsenter --net="$net" --mount="$mnt" --uts="$uts" --wd="$wd" -- sh -c "$init" ` + InitName + ` "$@"`

// InitName is the name a host's init runs under, PID 1 of its PID namespace: the script's
// $0 (`sh -c <script> nephele-host-init <boot command>`, so the fourth word of
// /proc/1/cmdline). Software in a host may look for it to learn that it runs in one
// (kubenode does).
const InitName = "nephele-host-init"

// initScript is the host's init, PID 1 of the host's PID namespace, in all of the host's
// namespaces, as a machine's init is in its own: software that finds the machine through
// /proc/1 (a privileged pod entering /proc/1/ns/mnt, as upstream's storage tests do)
// finds the host. Its traps come first: the kernel drops a signal sent from outside to a
// namespace's PID 1 that has no handler, and a stop's SIGTERM before the boot command
// runs ends the init at once. It mounts a /proc of the namespace over the one the host's
// mount namespace shows (a slave of the machine's: nothing shows outside), runs the boot
// command as its child with SIGINT and SIGQUIT at their defaults (a shell starts
// background commands with both ignored, and they would stay ignored), passes SIGTERM,
// SIGINT and SIGHUP on to it (SIGTERM once: a stop sends it again until the init answers),
// reaps whatever else ends up its child (the shell's wait
// collects every child, as an init must), and exits as the boot command did (128+N after
// signal N). Before it exits it says in the boot log how many processes the boot command
// left: the kernel kills them with the init, without a word. Its /proc stays until the
// next boot (resetProc).
const initScript = `child= termed=
forward() { if [ -n "$child" ]; then kill -"$1" "$child" 2>/dev/null; else exit $((128 + $2)); fi; }
term() { if [ -z "$termed" ]; then termed=1; forward TERM 15; fi; }
trap term TERM
trap 'forward INT 2' INT
trap 'forward HUP 1' HUP
mount -t proc -o nosuid,nodev,noexec proc /proc || exit 125
env --default-signal=INT,QUIT "$@" &
child=$!
while :; do
	wait $child
	status=$?
	kill -0 $child 2>/dev/null || break
done
set -- /proc/[0-9]*
if [ $# -gt 1 ]; then echo "--- ` + InitName + `: the boot command ended (status $status) and left $(($# - 1)) processes; they end with the host's init"; fi
exit $status`

// bootProc is a running boot process, started by this process or adopted from an
// earlier run.
type bootProc struct {
	pid   int
	start uint64
	began time.Time
	done  chan struct{}
	// exit says how it ended; set before done is closed.
	exit string
}

func (p *bootProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits until the process exits, d passes or ctx ends.
func (p *bootProc) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// adoptPoll is how often the end of an adopted boot process is looked for.
const adoptPoll = 200 * time.Millisecond

// adoptProcess watches a boot process an earlier run started: not this process's child,
// so its end is seen by polling /proc, until it ends or the machine is closed (then
// done stays open: the process outlived the machine).
func (m *Machine) adoptProcess(pid int, start uint64) *bootProc {
	p := &bootProc{pid: pid, start: start, began: time.Now(), done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(adoptPoll)
		defer tick.Stop()
		for sameProcess(pid, start) {
			select {
			case <-tick.C:
			case <-m.stop:
				return
			}
		}
		p.exit = "exited (adopted process; status unknown)"
		close(p.done)
	}()
	return p
}

// openLog opens the boot log for appending (which logcap.Trim needs of every writer),
// trimming it first when it is too big.
func (m *Machine) openLog(path string) (*os.File, error) {
	if _, err := logcap.Trim(path, m.cfg.MaxLogSize); err != nil {
		m.log.Error(err, "trimming a boot log")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening boot log: %w", err)
	}
	return f, nil
}

// keepLogs trims the hosts' boot logs to MaxLogSize every logCheck until the machine
// is closed: a boot process writes its log for as long as it runs.
func (m *Machine) keepLogs() {
	ctx, cancel := context.WithCancel(context.Background())
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		<-m.stop
		cancel()
	}()
	go func() {
		defer m.wg.Done()
		logcap.Keep(ctx, logCheck, m.cfg.MaxLogSize, func() []string {
			m.mu.Lock()
			defer m.mu.Unlock()
			paths := make([]string, 0, len(m.j.Hosts))
			for id := range m.j.Hosts {
				paths = append(paths, m.LogPath(id))
			}
			return paths
		}, func(path string, err error) { m.log.Error(err, "trimming a boot log", "log", path) })
	}()
}

// note appends a line of the cloud's own to a host's boot log.
func (m *Machine) note(id, format string, args ...any) {
	f, err := os.OpenFile(m.LogPath(id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(f, "--- nephele %s: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	_ = f.Close()
}

// boot starts the host's boot command and watches it. A failure to start it counts as
// an exit: the host is booted again after the backoff. A boot process that started but
// could not be recorded is watched all the same, and the error reported: booting another
// would leave this one running unsupervised. (Should the cloud crash meanwhile, the next
// start finds no boot process recorded and kills this one with the host's cgroup before
// it boots the host again.) The caller holds h.op; the host is up and running.
func (m *Machine) boot(h *host, rec *hostRecord) error {
	m.mu.Lock()
	spec, boots, gen := h.spec, h.boots, h.gen
	m.mu.Unlock()
	p, err := m.startBoot(spec, boots+1, rec)
	if p == nil {
		m.note(h.id, "boot failed: %v", err)
		m.log.Error(err, "booting host", "id", h.id)
		m.mu.Lock()
		h.lastErr = err.Error()
		m.scheduleRestart(h, 0)
		m.mu.Unlock()
		return err
	}
	if err != nil {
		err = fmt.Errorf("host %s boots (process %d), but recording its boot process failed: %w", h.id, p.pid, err)
		m.note(h.id, "%v", err)
		m.log.Error(err, "recording a boot process", "id", h.id, "pid", p.pid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h.proc, h.lastErr = p, ""
	if err != nil {
		h.lastErr = err.Error()
	}
	h.boots++
	m.watch(h, gen, p)
	return err
}

// startBoot starts the boot process of spec's host and records it. A process that
// started is returned also when recording it fails.
func (m *Machine) startBoot(spec HostSpec, boot int, rec *hostRecord) (*bootProc, error) {
	m.mu.Lock()
	if rec.Up == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("host %s is not up", spec.ID)
	}
	up, dir := *rec.Up, rec.Dir
	m.mu.Unlock()
	sh, err := lookPath("sh")
	if err != nil {
		return nil, err
	}
	logf, err := m.openLog(m.LogPath(spec.ID))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }()
	// The boot's init mounts the /proc of its PID namespace over whatever /proc the
	// host's mount namespace shows: the machine's, unless an earlier boot's init left its.
	if err := resetProc(up.MountNS); err != nil {
		return nil, fmt.Errorf("host %s: %w", spec.ID, err)
	}
	m.note(spec.ID, "boot %d: %s", boot, strings.Join(spec.BootCommand, " "))
	args := []string{"-c", bootScript, "nephele-boot", netnsPath(up.NetNS), up.MountNS, up.UTSNS, dir, initScript}
	args = append(args, m.cg.procsFiles(up.Cgroup)...)
	args = append(args, "--")
	args = append(args, spec.BootCommand...)
	cmd := exec.Command(sh, args...)
	cmd.Env = bootEnv(&spec, dir, up.Cgroup)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: no signal meant for the cloud reaches it, and it outlives a
	// cloud killed with SIGKILL, to be adopted by the next one.
	// A PID namespace of its own: the boot process is the host's PID 1 (initScript).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the boot command of host %s: %w", spec.ID, err)
	}
	p := &bootProc{pid: cmd.Process.Pid, began: time.Now(), done: make(chan struct{})}
	p.start, _ = procStart(p.pid)
	go func() {
		err := cmd.Wait()
		p.exit = describeExit(err)
		close(p.done)
	}()
	err = m.record(func() {
		if rec.Up != nil {
			rec.Up.BootPID, rec.Up.BootStart = p.pid, p.start
		}
	})
	return p, err
}

func describeExit(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	}
	return err.Error()
}

// watch restarts the host when p exits while the host should run, until the machine is
// closed. The caller holds mu.
func (m *Machine) watch(h *host, gen uint64, p *bootProc) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-p.done:
		case <-m.stop:
			return
		}
		// Under the host's op lock: a stop or start of the host waits, and one that
		// came first has changed gen.
		h.op.Lock()
		defer h.op.Unlock()
		m.mu.Lock()
		current := h.gen == gen && h.phase == PhaseRunning && !m.closed
		rec := m.j.Hosts[h.id]
		if !current || rec == nil || rec.Up == nil {
			m.mu.Unlock()
			return
		}
		ran := time.Since(p.began)
		h.lastExit, h.proc = p.exit, nil
		cgroup := rec.Up.Cgroup
		m.mu.Unlock()
		// The boot process is the host's init: what it leaves behind goes with it, so
		// the next boot does not find a second copy of everything.
		if n, err := m.cg.kill(cgroup, killTimeout); err != nil {
			m.log.Error(err, "killing what a host's boot process left", "id", h.id)
		} else if n > 0 {
			m.note(h.id, "boot process ended: killed %d processes it left", n)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if rec.Up != nil {
			rec.Up.BootPID, rec.Up.BootStart = 0, 0
		}
		if err := m.save(); err != nil {
			m.log.Error(err, "recording a boot process's exit", "id", h.id)
		}
		if h.gen == gen && !m.closed {
			m.scheduleRestart(h, ran)
		}
	}()
}

// scheduleRestart boots the host again after the backoff: it doubles after each boot
// that lasted less than MaxRestartBackoff and starts over after one that lasted longer.
// The caller holds mu.
func (m *Machine) scheduleRestart(h *host, ran time.Duration) {
	switch {
	case h.backoff == 0 || ran >= m.cfg.MaxRestartBackoff:
		h.backoff = m.cfg.RestartBackoff
	default:
		h.backoff = min(2*h.backoff, m.cfg.MaxRestartBackoff)
	}
	m.note(h.id, "boot process ended (%s) after %s; next boot in %s", h.lastExit, ran.Round(time.Millisecond), h.backoff)
	m.log.Info("host boot process exited; restarting", "id", h.id, "exit", h.lastExit, "ran", ran, "backoff", h.backoff)
	gen := h.gen
	h.timer = time.AfterFunc(h.backoff, func() {
		h.op.Lock()
		defer h.op.Unlock()
		m.mu.Lock()
		if h.gen != gen || h.phase != PhaseRunning || m.closed {
			m.mu.Unlock()
			return
		}
		h.timer = nil
		rec := m.j.Hosts[h.id]
		up := rec != nil && rec.Up != nil
		m.mu.Unlock()
		if up {
			_ = m.boot(h, rec)
		}
	})
}
