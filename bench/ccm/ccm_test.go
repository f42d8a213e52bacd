package ccm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/bench/ccm/nephele"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

func TestMainRefusesBadArguments(t *testing.T) {
	stats := filepath.Join(t.TempDir(), "stats.addr")
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no statistics file", []string{"--impl=nephele"}, 2, "--stats-addr-file is required"},
		{"unknown implementation", []string{"--impl=kcm", "--stats-addr-file=" + stats}, 2, `--impl "kcm": this binary runs nephele or upstream`},
		{"unknown flag", []string{"--bogus"}, 2, "bogus"},
		// Each manager validates its own flags and fails without starting.
		{"nephele without a provider", []string{"--impl=nephele", "--stats-addr-file=" + stats, "--", "--cloud-provider="}, 1, "--cloud-provider"},
		{"upstream with an unreadable kubeconfig", []string{"--impl=upstream", "--stats-addr-file=" + stats, "--",
			"--cloud-provider=local", "--kubeconfig=/nonexistent/kubeconfig", "--secure-port=0"}, 1, "nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			impls := map[Impl]Func{Nephele: nephele.Run, Upstream: upstream.Run}
			if code := Main(tt.args, &stderr, impls); code != tt.code {
				t.Fatalf("Main = %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.msg) {
				t.Fatalf("stderr does not mention %q:\n%s", tt.msg, stderr.String())
			}
		})
	}
}

func TestStatsEndpoint(t *testing.T) {
	addrFile := filepath.Join(t.TempDir(), "stats.addr")
	ctx, cancel := context.WithCancel(t.Context())
	s, err := startStats(ctx, addrFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		s.wait()
	}()
	addr, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatalf("the address file: %v", err)
	}
	// Allocate and keep something, so that a later sample sees a larger heap.
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	// /stats answers the last sample, taken every sampleEvery: wait for one that saw
	// the allocation.
	var st Stats
	poll.Eventually(t, "a sample with the 4 MiB allocated", func() error {
		resp, err := http.Get("http://" + string(addr) + "/stats")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		st = Stats{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err
		}
		if st.PeakHeapObjectsBytes < 4<<20 {
			return fmt.Errorf("peak heap %d does not include the 4 MiB allocated", st.PeakHeapObjectsBytes)
		}
		return nil
	})
	if st.TotalBytes == 0 || st.HeapObjectsBytes == 0 || st.Goroutines == 0 {
		t.Fatalf("empty statistics: %+v", st)
	}
	if st.PeakTotalBytes < st.TotalBytes || st.PeakHeapObjectsBytes < st.HeapObjectsBytes || st.PeakGoroutines < st.Goroutines {
		t.Fatalf("a peak below its current value: %+v", st)
	}
	_ = keep[len(keep)-1]
}
