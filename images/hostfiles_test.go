package images

import (
	"slices"
	"testing"
)

func TestParseLdd(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string
		wantErr bool
	}{
		{"dynamic", "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n",
			[]string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, false},
		{"only the vDSO", "\tlinux-vdso.so.1 (0x00007ffd)\n", nil, false},
		{"missing library", "\tlibfoo.so.1 => not found\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLdd(tt.out)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("parseLdd = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
