package local

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// TestIntegrationTLS runs a local cloud whose API is HTTPS on a certificate it made at
// start (--serving-ca-file) and builds providers against it: only the one that verifies
// with the cloud's own CA certificate gets an answer.
func TestIntegrationTLS(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	srv, _ := servertest.Start(t, server.Config{
		Token:         "integration-token",
		VIPPool:       testnet.LoopbackPrefix(107),
		InstanceCIDR:  testnet.LoopbackPrefix(108),
		ServingCAFile: caFile,
		Logger:        testlog.New(t, 1),
	})
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("the cloud serves at %s, want https", srv.URL())
	}
	tokenFile := writeFile(t, "token", "integration-token\n")
	otherCA := writeFile(t, "other-ca.crt", string(testCA(t)))
	tests := []struct {
		name    string
		config  string
		wantErr string // "" is success
	}{
		{name: "the cloud's CA", config: fmt.Sprintf("endpoint: %s\ntokenFile: %s\ncaFile: %s\n", srv.URL(), tokenFile, caFile)},
		{name: "another CA", config: fmt.Sprintf("endpoint: %s\ntokenFile: %s\ncaFile: %s\n", srv.URL(), tokenFile, otherCA), wantErr: "certificate signed by unknown authority"},
		{name: "the system's roots", config: fmt.Sprintf("endpoint: %s\ntokenFile: %s\n", srv.URL(), tokenFile), wantErr: "certificate signed by unknown authority"},
		{name: "plain HTTP to the HTTPS port", config: fmt.Sprintf("endpoint: %s\ntokenFile: %s\n", strings.Replace(srv.URL(), "https://", "http://", 1), tokenFile), wantErr: "400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(strings.NewReader(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			lister, _ := p.InstanceLister()
			_, err = lister.ListInstances(context.Background())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("listing instances: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("listing instances: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
