package smallfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path    string
		limit   int64
		want    string
		wantErr string
	}{
		{path: name, limit: 5, want: "12345"},
		{path: name, limit: 4, wantErr: "larger than 4 bytes"},
		{path: filepath.Join(dir, "missing"), limit: 5, wantErr: "no such file"},
		{path: dir, limit: 5, wantErr: "not a regular file"},
		{path: fifo, limit: 5, wantErr: "not a regular file"},
	} {
		got, err := Read(tt.path, tt.limit)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Read(%s, %d) = %v, want an error with %q", tt.path, tt.limit, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || string(got) != tt.want):
			t.Errorf("Read(%s, %d) = %q, %v, want %q", tt.path, tt.limit, got, err, tt.want)
		}
	}
}
