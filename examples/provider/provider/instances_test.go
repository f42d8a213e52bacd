package provider_test

import (
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
	"example.com/cloud-provider-example/provider"
)

// TestProviderIDs checks how InstanceMetadata reads a Node's provider ID: only a
// well-formed ID of this provider is looked up, and a malformed one is Invalid, never
// NotFound (which would delete the Node).
func TestProviderIDs(t *testing.T) {
	ctx := t.Context()
	c, err := examplecloud.Open("", "ex-1")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: "node-1"})
	if err != nil || inst.ID != "vm-000001" {
		t.Fatalf("CreateInstance = %+v, %v", inst, err)
	}
	in, _ := provider.NewForCloud(c).Instances()

	const (
		found    = "found"
		notFound = "not found"
		invalid  = "invalid"
	)
	tests := []struct {
		providerID string
		want       string
		// msg is a substring of the error.
		msg string
	}{
		{providerID: "example://vm-000001", want: found},
		{providerID: "example://vm-999999", want: notFound},
		{providerID: "example:///vm-000001", want: invalid, msg: `must not begin with "/"`},
		{providerID: "example:////vm-000001", want: invalid, msg: "spec.providerID"},
		{providerID: "example:///", want: invalid, msg: "spec.providerID"},
		{providerID: "example://", want: invalid, msg: "spec.providerID"},
		{providerID: "example:////", want: invalid, msg: "spec.providerID"},
		{providerID: "aws:///us-east-1a/i-1", want: invalid, msg: `belongs to provider "aws"`},
		{providerID: "vm-000001", want: invalid, msg: "spec.providerID"},
	}
	for _, tt := range tests {
		t.Run(tt.providerID, func(t *testing.T) {
			got, err := in.InstanceMetadata(ctx, node("node-1", tt.providerID))
			switch tt.want {
			case found:
				if err != nil || got.ProviderID != "example://vm-000001" {
					t.Errorf("InstanceMetadata = %+v, %v; want instance vm-000001", got, err)
				}
			case notFound:
				if !cloud.IsNotFound(err) {
					t.Errorf("InstanceMetadata = %+v, %v; want NotFound", got, err)
				}
			case invalid:
				if !cloud.IsInvalid(err) || cloud.IsNotFound(err) || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("InstanceMetadata = %+v, %v; want Invalid, never NotFound, mentioning %q", got, err, tt.msg)
				}
			}
		})
	}
}
