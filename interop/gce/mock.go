package gce

import (
	"context"
	"fmt"
	"sync"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/mock"
	"golang.org/x/oauth2"
	compute "google.golang.org/api/compute/v1"
	gce "k8s.io/cloud-provider-gcp/providers/gce"
)

// Values name the project, region and zone of a mock GCE cloud.
type Values struct {
	Project, Region, Zone string
	// Network is the VPC's name; its URL is what GCE's provider puts on routes.
	Network string
}

// Mock is GCE's provider on an in-memory compute API.
type Mock struct {
	// Cloud is GCE's provider, unchanged: what a GCE cloud-controller-manager runs.
	Cloud *gce.Cloud
	// API is the in-memory compute API it calls: tests create instances there and read
	// what the provider made (target pools, forwarding rules, firewalls, routes).
	API  *cloud.MockGCE
	vals Values
}

// NewMock builds GCE's provider with gce.CreateGCECloudWithCloud, as GCE's own
// cloud-controller-manager builds it from a cloud config, on MockGCE with the hooks
// GCE's own tests install (fakeGCECloud in gce_util.go), which the mock needs to act on
// target pools, forwarding rules, addresses, instance groups, health checks and
// firewalls. Nothing reaches the network: the config names the project, the zones and
// the network, so the provider asks no metadata server, and its token source is static.
//
// GCE's provider builds its TPU client from Application Default Credentials whatever
// token source its config has (newTPUService in v0.28.2), so the caller must provide
// some (GOOGLE_APPLICATION_CREDENTIALS naming a file); nothing here calls the TPU API,
// so they are never exchanged for a token.
//
// gce.NewFakeGCECloud is not used: in v0.28.2 it leaves the provider's node zones nil,
// and the first zoned Node it is told about panics in updateNodeZones.
func NewMock(vals Values) (*Mock, error) {
	api := cloud.NewMockGCE(&cloud.SingleProjectRouter{ID: vals.Project})
	api.MockTargetPools.AddInstanceHook = mock.AddInstanceHook
	api.MockTargetPools.RemoveInstanceHook = mock.RemoveInstanceHook
	api.MockForwardingRules.InsertHook = mock.InsertFwdRuleHook
	api.MockAddresses.InsertHook = mock.InsertAddressHook
	api.MockAlphaAddresses.InsertHook = mock.InsertAlphaAddressHook
	api.MockAlphaAddresses.X = mock.AddressAttributes{}
	api.MockAddresses.X = mock.AddressAttributes{}
	api.MockInstanceGroups.X = mock.InstanceGroupAttributes{
		InstanceMap: make(map[meta.Key]map[string]*compute.InstanceWithNamedPorts),
		Lock:        &sync.Mutex{},
	}
	api.MockInstanceGroups.AddInstancesHook = mock.AddInstancesHook
	api.MockInstanceGroups.RemoveInstancesHook = mock.RemoveInstancesHook
	api.MockInstanceGroups.ListInstancesHook = mock.ListInstancesHook
	api.MockRegionBackendServices.UpdateHook = mock.UpdateRegionBackendServiceHook
	api.MockHealthChecks.UpdateHook = mock.UpdateHealthCheckHook
	api.MockFirewalls.UpdateHook = mock.UpdateFirewallHook
	api.MockFirewalls.PatchHook = mock.UpdateFirewallHook

	m := &Mock{API: api, vals: vals}
	c, err := gce.CreateGCECloudWithCloud(&gce.CloudConfig{
		ProjectID:        vals.Project,
		NetworkProjectID: vals.Project,
		Region:           vals.Region,
		Zone:             vals.Zone,
		ManagedZones:     []string{vals.Zone},
		NetworkURL:       m.NetworkURL(),
		NodeTags:         []string{"k8s-node"},
		TokenSource:      oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "mock"}),
		AlphaFeatureGate: gce.NewAlphaFeatureGate(nil),
	}, api)
	if err != nil {
		return nil, fmt.Errorf("building GCE's provider on the mock: %w", err)
	}
	m.Cloud = c
	// Zones are read-only in the API; the mock holds them as objects, as GCE's tests
	// add theirs.
	api.MockZones.Objects[*meta.GlobalKey(vals.Zone)] = &cloud.MockZonesObj{Obj: &compute.Zone{Name: vals.Zone, Region: m.regionURL()}}
	return m, nil
}

// NetworkURL is the mock network's URL.
func (m *Mock) NetworkURL() string { return m.url("global/networks/" + m.vals.Network) }

func (m *Mock) regionURL() string { return m.url("regions/" + m.vals.Region) }

// url is the URL of a resource of the mock's project, as the compute API names it.
func (m *Mock) url(path string) string {
	return fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/%s", m.vals.Project, path)
}

// AddInstance creates a running instance in the mock's zone with an internal and an
// external address, as a VM a node runs on.
func (m *Mock) AddInstance(ctx context.Context, name, machineType, internalIP, externalIP string) error {
	inst := &compute.Instance{
		Name:        name,
		Zone:        m.url("zones/" + m.vals.Zone),
		MachineType: m.url("zones/" + m.vals.Zone + "/machineTypes/" + machineType),
		Status:      "RUNNING",
		Tags:        &compute.Tags{Items: []string{"k8s-node"}},
		NetworkInterfaces: []*compute.NetworkInterface{{
			Network:       m.NetworkURL(),
			NetworkIP:     internalIP,
			AccessConfigs: []*compute.AccessConfig{{Type: "ONE_TO_ONE_NAT", NatIP: externalIP}},
		}},
	}
	if err := m.API.Instances().Insert(ctx, meta.ZonalKey(name, m.vals.Zone), inst); err != nil {
		return fmt.Errorf("creating instance %s in the mock: %w", name, err)
	}
	return nil
}

// RemoveInstance deletes an instance from the mock, as a VM terminated in the cloud.
func (m *Mock) RemoveInstance(ctx context.Context, name string) error {
	if err := m.API.Instances().Delete(ctx, meta.ZonalKey(name, m.vals.Zone)); err != nil {
		return fmt.Errorf("deleting instance %s from the mock: %w", name, err)
	}
	return nil
}
