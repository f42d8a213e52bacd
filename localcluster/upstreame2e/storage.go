package upstreame2e

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
)

// StorageTestDriver is the definition of nephele's CSI driver that upstream's external
// storage suite reads (e2e.test --storage.testdriver, test/e2e/storage/external): the
// default StorageClass o renders, the sizes the local cloud takes, xfs (the default) and
// ext4, and the capabilities the driver has. Every capability left out (snapshots, clones,
// ReadWriteMany, capacity, volume attribute classes) makes the suite skip its tests,
// each with that reason in its report.
func StorageTestDriver(o render.CSIOptions) ([]byte, error) {
	def := map[string]any{
		"StorageClass": map[string]any{"FromExistingClassName": render.CSIStorageClass},
		"DriverInfo": map[string]any{
			"Name": o.DriverName,
			// The local cloud rounds sizes up to a MiB; its largest volume is 1 TiB. The
			// driver makes a volume of xfs at least 300 MiB.
			"SupportedSizeRange":   map[string]any{"Min": "1Mi", "Max": "1Ti"},
			"SupportedFsType":      map[string]any{"": map[string]any{}, "xfs": map[string]any{}, "ext4": map[string]any{}},
			"TopologyKeys":         []string{corev1.LabelTopologyZone},
			"NumAllowedTopologies": 1,
			"Capabilities": map[string]bool{
				"persistence":         true, // data outlives the pod
				"block":               true, // raw block volumes
				"fsGroup":             true, // ownership by fsGroup (fsGroupPolicy ReadWriteOnceWithFSType)
				"exec":                true, // binaries run from the volume
				"multipods":           true, // pods on one node share a volume
				"singleNodeVolume":    true, // a disk attaches to one node at a time
				"controllerExpansion": true,
				"nodeExpansion":       true,
				"onlineExpansion":     true,
				"offlineExpansion":    true,
				"topology":            true, // topology.kubernetes.io/zone
				"volumeLimits":        o.MaxVolumesPerNode > 0,
			},
		},
	}
	data, err := yaml.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("the storage test driver: %w", err)
	}
	return data, nil
}
