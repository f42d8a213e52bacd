package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestOpenRefusesCorruptFile writes garbage into state files in the ways a disk or a
// killed copy can, and opens them: each is a *CorruptError naming the file and
// --cleanup, not a panic (before, bbolt panicked on the two whose meta pages were
// intact), the file is left as it was, and its lock is released.
func TestOpenRefusesCorruptFile(t *testing.T) {
	good, instancesPage := goodStateFile(t)
	garbage := func(n int) []byte { return bytes.Repeat([]byte{0xab}, n) }
	// bbolt's first two pages are its meta pages (4 KiB each here).
	const metaPages = 2 * 4096
	tests := []struct {
		name string
		data []byte
	}{
		{"not a bbolt file", garbage(len(good))},
		{"one byte", []byte{0}},
		{"data pages overwritten with garbage", append(bytes.Clone(good[:metaPages]), garbage(len(good)-metaPages)...)},
		{"data pages zeroed", append(bytes.Clone(good[:metaPages]), make([]byte, len(good)-metaPages)...)},
		{"cut short", bytes.Clone(good[:len(good)/2])},
		{"meta pages only", bytes.Clone(good[:metaPages])},
		// Found only by reading every page at open: nothing else reads it before a request.
		{"an instance page overwritten with garbage", overwritePage(good, instancesPage, garbage(4096))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			// Twice: a lock left behind by the first would make the second time out.
			for range 2 {
				s, err := Open(path)
				if err == nil {
					_ = s.Close()
					t.Fatal("Open succeeded")
				}
				var corrupt *CorruptError
				if !errors.As(err, &corrupt) || corrupt.Path != path {
					t.Fatalf("Open: %v (%T), want a *CorruptError for %s", err, err, path)
				}
				for _, want := range []string{"state file " + path + " is corrupt", "localcloud --cleanup --state " + path, "move the file aside"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not say %q", err, want)
					}
				}
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, tt.data) {
				t.Errorf("the file changed (%d bytes, was %d): %v", len(got), len(tt.data), err)
			}
		})
	}
}

// goodStateFile returns the bytes of a closed state file holding instances enough to
// give their bucket a page of its own, and the number of that page.
func goodStateFile(t *testing.T) (data []byte, instancesPage int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	for i := range 20 {
		createInstance(t, s, fmt.Sprintf("n%d", i))
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		instancesPage = int(tx.Bucket(bucketInstances).RootPage())
		return nil
	})
	if instancesPage == 0 {
		t.Fatal("the instances bucket is inline: create more instances")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, instancesPage
}

// overwritePage returns data with page n (4 KiB pages) replaced by with.
func overwritePage(data []byte, n int, with []byte) []byte {
	out := bytes.Clone(data)
	copy(out[n*4096:(n+1)*4096], with)
	return out
}
