package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/atomicfile"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	tests := []struct {
		name  string
		write func() error
		want  string
		mode  os.FileMode
		err   string
	}{
		{"new file", func() error { return atomicfile.Write(path, []byte("one"), 0o600) }, "one", 0o600, ""},
		{"replaced", func() error { return atomicfile.Write(path, []byte("two"), 0o644) }, "two", 0o644, ""},
		{"streamed", func() error {
			return atomicfile.WriteFunc(path, 0o640, func(w io.Writer) error {
				_, err := io.WriteString(w, "three")
				return err
			})
		}, "three", 0o640, ""},
		{"failed write keeps the file", func() error {
			return atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
				_, _ = io.WriteString(w, "half")
				return errors.New("the writer broke")
			})
		}, "three", 0o640, "the writer broke"},
		{"missing directory", func() error { return atomicfile.Write(filepath.Join(dir, "no", "f"), nil, 0o600) }, "three", 0o640, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.write()
			if (err == nil) != (tt.err == "") || err != nil && (!strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "write ")) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want || fi.Mode().Perm() != tt.mode {
				t.Errorf("the file holds %q with mode %v, want %q with %v", got, fi.Mode().Perm(), tt.want, tt.mode)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("the directory holds %v, want the file alone (no temporary file left)", entries)
			}
		})
	}
}
