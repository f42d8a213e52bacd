package ccm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// sampleEvery is how often the memory statistics are read. runtime/metrics reads do not
// stop the world, so sampling costs the managers under test next to nothing.
const sampleEvery = 250 * time.Millisecond

// Stats is the memory of a controller process as its Go runtime sees it, current and
// the peak of the samples so far.
type Stats struct {
	// HeapLiveBytes is the heap still reachable at the end of the last GC
	// (runtime/metrics /gc/heap/live:bytes): the managers' real working set.
	HeapLiveBytes uint64 `json:"heapLiveBytes"`
	// HeapObjectsBytes is the heap occupied by objects, reachable or not yet swept
	// (/memory/classes/heap/objects:bytes, runtime.MemStats.HeapAlloc).
	HeapObjectsBytes uint64 `json:"heapObjectsBytes"`
	// TotalBytes is all memory the Go runtime has mapped (/memory/classes/total:bytes,
	// runtime.MemStats.Sys).
	TotalBytes uint64 `json:"totalBytes"`
	// Goroutines is the number of live goroutines.
	Goroutines uint64 `json:"goroutines"`
	// The peaks of the values above over every sample since the process started.
	PeakHeapLiveBytes    uint64 `json:"peakHeapLiveBytes"`
	PeakHeapObjectsBytes uint64 `json:"peakHeapObjectsBytes"`
	PeakTotalBytes       uint64 `json:"peakTotalBytes"`
	PeakGoroutines       uint64 `json:"peakGoroutines"`
}

var sampleNames = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/sched/goroutines:goroutines",
}

// sampler keeps Stats up to date and serves them, and the process's profiles.
type sampler struct {
	mu      sync.Mutex
	stats   Stats
	samples []metrics.Sample
	wg      sync.WaitGroup
}

// startStats samples until ctx is done and serves GET /stats on a loopback port whose
// address it writes to addrFile (atomically, so a reader never sees half of it).
func startStats(ctx context.Context, addrFile string) (*sampler, error) {
	s := &sampler{samples: make([]metrics.Sample, len(sampleNames))}
	for i, n := range sampleNames {
		s.samples[i].Name = n
	}
	s.sample()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("memory statistics endpoint: %w", err)
	}
	tmp := addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o644); err != nil {
		ln.Close()
		return nil, fmt.Errorf("writing the statistics address: %w", err)
	}
	if err := os.Rename(tmp, filepath.Clean(addrFile)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("writing the statistics address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.current())
	})
	// Profiles of the manager under test, for finding where its memory and CPU go
	// during a run (go tool pprof http://ADDR/debug/pprof/heap). The endpoint is on
	// loopback and exists only in the benchmark's wrapper.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "memory statistics endpoint:", err)
		}
	})
	s.wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	s.wg.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s, nil
}

func (s *sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	metrics.Read(s.samples)
	v := func(i int) uint64 {
		if s.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.samples[i].Value.Uint64()
	}
	st := &s.stats
	st.HeapLiveBytes, st.HeapObjectsBytes, st.TotalBytes, st.Goroutines = v(0), v(1), v(2), v(3)
	if st.Goroutines == 0 {
		st.Goroutines = uint64(runtime.NumGoroutine())
	}
	st.PeakHeapLiveBytes = max(st.PeakHeapLiveBytes, st.HeapLiveBytes)
	st.PeakHeapObjectsBytes = max(st.PeakHeapObjectsBytes, st.HeapObjectsBytes)
	st.PeakTotalBytes = max(st.PeakTotalBytes, st.TotalBytes)
	st.PeakGoroutines = max(st.PeakGoroutines, st.Goroutines)
}

func (s *sampler) current() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// wait returns once the sampler's goroutines have stopped; its context must be done.
func (s *sampler) wait() { s.wg.Wait() }
