package proctest

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Main(program)
	os.Exit(m.Run())
}

// program is the test binary's stand-in program: "exit N" exits with N; "serve" says
// so and runs until SIGTERM, then exits 0; "env" prints whether it looks like a child.
func program() int {
	switch os.Args[1] {
	case "exit":
		n, _ := strconv.Atoi(os.Args[2])
		fmt.Fprintln(os.Stderr, "exiting with", n)
		return n
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Println("serving")
		<-sig
		fmt.Println("stopped")
		return 0
	case "env":
		_, child := os.LookupEnv(childEnv)
		fmt.Println("marked:", child)
		return 0
	}
	return 2
}

func TestExitCodesAndOutput(t *testing.T) {
	for _, code := range []int{0, 3} {
		p := Start(t, "exiter", "exit", strconv.Itoa(code))
		if got := p.Wait(t, Timeout); got != code {
			t.Errorf("exit code %d, want %d", got, code)
		}
		if want := fmt.Sprintf("exiting with %d\n", code); p.Output() != want {
			t.Errorf("output %q, want %q", p.Output(), want)
		}
		if (p.Err() == nil) != (code == 0) {
			t.Errorf("Err() = %v for exit code %d", p.Err(), code)
		}
	}
}

func TestSignalAndWaitOutput(t *testing.T) {
	p := Start(t, "server", "serve")
	p.WaitOutput(t, "serving", Timeout)
	if p.Err() != nil {
		t.Fatalf("Err() = %v while running", p.Err())
	}
	p.Stop(t, Timeout)
	p.WaitOutput(t, "stopped", Timeout) // written before it exited

	p = Start(t, "server", "serve")
	p.WaitOutput(t, "serving", Timeout)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, Timeout); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestKill(t *testing.T) {
	p := Start(t, "server", "serve")
	p.WaitOutput(t, "serving", Timeout)
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before the process exited")
	}
	if code := p.Wait(t, time.Second); code != -1 {
		t.Errorf("exit code %d after SIGKILL, want -1", code)
	}
	p.Kill() // a second Kill does nothing
}

func TestExec(t *testing.T) {
	p := Exec(t, "sh", "/bin/sh", "-c", "echo from sh; exit 4")
	if code := p.Wait(t, Timeout); code != 4 || p.Output() != "from sh\n" {
		t.Errorf("exit code %d output %q, want 4 and %q", code, p.Output(), "from sh\n")
	}
}

func TestMentioning(t *testing.T) {
	mark := fmt.Sprintf("proctest-mark-%d", os.Getpid())
	p := Start(t, "server", "serve", mark)
	p.WaitOutput(t, "serving", Timeout)
	if got := Mentioning(t, mark); len(got) != 1 || got[0] != p.Pid() {
		t.Errorf("Mentioning(%q) = %v, want [%d]", mark, got, p.Pid())
	}
	p.Kill()
	if got := Mentioning(t, mark); len(got) != 0 {
		t.Errorf("Mentioning(%q) = %v after the process was killed and reaped", mark, got)
	}
}

func TestTheChildIsNotMarkedForItsOwnChildren(t *testing.T) {
	p := Start(t, "env", "env")
	p.Wait(t, Timeout)
	if p.Output() != "marked: false\n" {
		t.Errorf("the child sees %q; want its mark removed before the program runs", p.Output())
	}
}
