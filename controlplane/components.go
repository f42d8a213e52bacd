package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// StartControllerManager starts a kube-controller-manager with an external cloud provider
// (so it runs no cloud controllers), the service account signing key, no serving port and,
// unless args say otherwise, no leader election. args are appended after the defaults and
// override them, e.g. "--leader-elect=true", "--controllers=*,-nodeipam" or
// "--enable-leader-migration", "--leader-migration-config=FILE". With no serving port
// there is nothing to probe: it returns once the process has run for a moment without
// exiting, so wait on its effects, such as its Lease. Each call starts a new process with
// its own log file.
func (e *Env) StartControllerManager(ctx context.Context, args ...string) (*Process, error) {
	return e.StartControllerManagerBinary(ctx, controllerManagerBinary, args...)
}

// StartControllerManagerBinary is StartControllerManager for another kube-controller-manager
// build in the bin directory, such as ControllerManagerV135.
func (e *Env) StartControllerManagerBinary(ctx context.Context, binary string, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--authentication-kubeconfig", e.Kubeconfig,
		"--authorization-kubeconfig", e.Kubeconfig,
		"--cloud-provider=external",
		"--service-account-private-key-file", e.creds.saKey,
		"--root-ca-file", e.creds.caFile,
		"--secure-port=0",
		"--leader-elect=false",
	}
	return e.startComponent(ctx, binary, append(defaults, args...))
}

// StartScheduler starts a kube-scheduler without leader election or serving port; args
// are appended after the defaults and override them. Like StartControllerManager, it
// returns once the process has run for a moment without exiting.
func (e *Env) StartScheduler(ctx context.Context, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--authentication-kubeconfig", e.Kubeconfig,
		"--authorization-kubeconfig", e.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
	}
	return e.startComponent(ctx, schedulerBinary, append(defaults, args...))
}

// StartKwok starts kwok managing all Nodes with every stage file in bin/kwok-stages, so
// Nodes turn Ready and heartbeat and Pods bound to them run. args are appended after the
// defaults. It returns once kwok's health endpoint answers.
func (e *Env) StartKwok(ctx context.Context, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	if _, err := binary(e.binDir, kwokBinary); err != nil {
		return nil, err
	}
	stages, err := kwokStages(e.binDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--manage-all-nodes=true",
		"--server-address", addr,
	}
	for _, s := range stages {
		defaults = append(defaults, "--config", s)
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	// kwok reads ~/.kwok/kwok.yaml when present; a HOME of its own keeps the user's out.
	home := filepath.Join(e.Dir, "kwok-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, fmt.Errorf("start kwok: %w", err)
	}
	p, err := e.run(kwokBinary, append(defaults, args...), []string{"HOME=" + home})
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, p, "http://"+addr+"/healthz", nil); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// startComponent runs a component that has nothing to probe, and catches the common case
// of it failing at once on a bad flag.
func (e *Env) startComponent(ctx context.Context, name string, args []string) (*Process, error) {
	p, err := e.run(name, args, nil)
	if err != nil {
		return nil, err
	}
	settle := time.NewTimer(500 * time.Millisecond)
	defer settle.Stop()
	select {
	case <-p.Done():
		return nil, p.exitedError()
	case <-ctx.Done():
		return nil, errors.Join(fmt.Errorf("start %s: %w", name, context.Cause(ctx)), p.Stop())
	case <-settle.C:
		return p, nil
	}
}

// StartProcess starts another binary from the bin directory as part of the env, such as
// a cloud-controller-manager or a cloud service the control plane works with. Like the
// control plane's own processes it runs in its own process group, logs to a file in Dir
// named after it, and is stopped by Stop before every process started earlier, so it can
// still reach the apiserver while it shuts down. It returns as soon as the process has
// started: readiness is the caller's to wait for, for example on p.Done() and a probe.
func (e *Env) StartProcess(name string, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	return e.run(name, args, nil)
}

// StartCommand starts cmd, a program from anywhere (its path, arguments and environment
// set by the caller), as a process of the env named name: like StartProcess, it runs in
// its own process group, logs to name's file in Dir and is stopped by Stop before every
// process started earlier. The caller must not set cmd's output or SysProcAttr.
func (e *Env) StartCommand(name string, cmd *exec.Cmd) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	return e.startCommand(name, cmd)
}

// run starts a binary from the bin directory, logging to its own file in Dir, and
// registers it so Stop ends it. extraEnv is added to this program's environment.
func (e *Env) run(name string, args, extraEnv []string) (*Process, error) {
	path, err := binary(e.binDir, name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	return e.startCommand(name, cmd)
}

// startCommand starts cmd as process name, logging to its own file in Dir, and registers it so
// Stop ends it.
func (e *Env) startCommand(name string, cmd *exec.Cmd) (*Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, fmt.Errorf("start %s: env is stopped", name)
	}
	e.counts[name]++
	logName := name + ".log"
	if n := e.counts[name]; n > 1 {
		logName = fmt.Sprintf("%s-%d.log", name, n)
	}
	p, err := startCommand(name, cmd, filepath.Join(e.Dir, logName))
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}
