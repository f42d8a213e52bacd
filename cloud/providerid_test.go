package cloud

import (
	"strings"
	"testing"
)

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ProviderID
		wantErr string // substring of the error; empty means success
	}{
		{name: "simple", in: "local://node-1", want: ProviderID{Provider: "local", ID: "node-1"}},
		{name: "aws style with slashes", in: "aws:///us-east-1a/i-0123", want: ProviderID{Provider: "aws", ID: "/us-east-1a/i-0123"}},
		{name: "gce style", in: "gce://project/zone/name", want: ProviderID{Provider: "gce", ID: "project/zone/name"}},
		{name: "scheme with digits and punctuation", in: "my-cloud.v2+x://id", want: ProviderID{Provider: "my-cloud.v2+x", ID: "id"}},
		{name: "id contains scheme separator", in: "a://b://c", want: ProviderID{Provider: "a", ID: "b://c"}},
		{name: "empty", in: "", wantErr: "want the form"},
		{name: "no separator", in: "node-1", wantErr: "want the form"},
		{name: "single slash", in: "aws:/i-1", wantErr: "want the form"},
		{name: "empty provider", in: "://i-1", wantErr: "provider name is empty"},
		{name: "upper-case provider", in: "AWS://i-1", wantErr: "only lower-case"},
		{name: "provider with space", in: "a b://i-1", wantErr: "only lower-case"},
		{name: "provider with colon", in: "a:b://i-1", wantErr: "only lower-case"},
		{name: "empty id", in: "aws://", wantErr: "instance ID is empty"},
		{name: "only slashes", in: "aws:////", wantErr: "instance ID is empty"},
		{name: "space in id", in: "aws://i 1", wantErr: "white space"},
		{name: "tab in id", in: "aws://i\t1", wantErr: "white space"},
		{name: "newline in id", in: "aws://i-1\n", wantErr: "white space"},
		{name: "carriage return in id", in: "aws://i-1\r", wantErr: "white space"},
		{name: "NUL in id", in: "aws://i\x001", wantErr: "control characters"},
		{name: "non-breaking space in id", in: "aws://i\u00a01", wantErr: "white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProviderID(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseProviderID(%q) = %+v, want an error containing %q", tt.in, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseProviderID(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
				}
				if got != (ProviderID{}) {
					t.Errorf("ParseProviderID(%q) returned %+v with an error, want the zero value", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProviderID(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseProviderID(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want the input %q back", got.String(), tt.in)
			}
		})
	}
}

func TestNewProviderID(t *testing.T) {
	tests := []struct {
		provider, id string
		wantErr      bool
	}{
		{provider: "local", id: "node-1"},
		{provider: "aws", id: "/us-east-1a/i-1"},
		{provider: "", id: "x", wantErr: true},
		{provider: "Local", id: "x", wantErr: true},
		{provider: "local", id: "", wantErr: true},
		{provider: "local", id: "a b", wantErr: true},
	}
	for _, tt := range tests {
		got, err := NewProviderID(tt.provider, tt.id)
		if tt.wantErr {
			if err == nil {
				t.Errorf("NewProviderID(%q, %q) = %+v, want an error", tt.provider, tt.id, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewProviderID(%q, %q) error = %v", tt.provider, tt.id, err)
			continue
		}
		back, err := ParseProviderID(got.String())
		if err != nil || back != got {
			t.Errorf("ParseProviderID(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
}

// FuzzParseProviderID checks that parsing never panics and that every accepted input
// survives a round trip through String.
func FuzzParseProviderID(f *testing.F) {
	for _, seed := range []string{
		"local://node-1", "aws:///us-east-1a/i-0123", "gce://p/z/n", "a://b://c",
		"", "://", "x://", "x:////", "X://y", "a b://c", "a://b c", "a://\x00", "\xff://\xfe",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProviderID(s)
		if err != nil {
			if p != (ProviderID{}) {
				t.Fatalf("ParseProviderID(%q) returned %+v with error %v", s, p, err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("ParseProviderID(%q).String() = %q", s, p.String())
		}
		again, err := NewProviderID(p.Provider, p.ID)
		if err != nil || again != p {
			t.Fatalf("NewProviderID(%q, %q) = %+v, %v; want %+v", p.Provider, p.ID, again, err, p)
		}
	})
}
