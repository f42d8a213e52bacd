package render

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nephele-dev/nephele/csi"
	"github.com/nephele-dev/nephele/images"
)

// TestCSIDefaultsMatchTheirSources keeps the defaults equal to what they name: the
// driver's own default name and file system, and the references of the images nephele
// builds.
func TestCSIDefaultsMatchTheirSources(t *testing.T) {
	o := DefaultCSIOptions()
	for _, tc := range []struct{ what, got, want string }{
		{"driver name", o.DriverName, csi.DefaultName},
		{"driver image", o.DriverImage, images.CSIDriver.Ref(images.DefaultVersion)},
		{"provisioner image", o.ProvisionerImage, images.CSIProvisioner.Ref()},
		{"attacher image", o.AttacherImage, images.CSIAttacher.Ref()},
		{"resizer image", o.ResizerImage, images.CSIResizer.Ref()},
		{"provisioner default fstype", csiDefaultFSType, csi.DefaultFSType},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: default %q, want %q", tc.what, tc.got, tc.want)
		}
	}
}

// TestRenderCSIRefusesBadOptions: every bad option is named by its flag, all at once,
// and nothing is rendered.
func TestRenderCSIRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*CSIOptions)
		want   []string
	}{
		{"namespace", func(o *CSIOptions) { o.Namespace = "Kube_System" }, []string{"namespace"}},
		{"driver name", func(o *CSIOptions) { o.DriverName = "not a name" }, []string{"driver-name"}},
		{"long driver name", func(o *CSIOptions) {
			o.DriverName = "a.abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij.dev"
		}, []string{"driver-name"}},
		{"images", func(o *CSIOptions) {
			o.DriverImage, o.ResizerImage, o.AttacherImage = "", "a b", "Registry.Example/Attacher:v4"
		},
			[]string{"driver-image", "attacher-image", "resizer-image"}},
		{"pull policy", func(o *CSIOptions) { o.ImagePullPolicy = "Sometimes" }, []string{"image-pull-policy"}},
		{"replicas", func(o *CSIOptions) { o.ControllerReplicas = 0 }, []string{"controller-replicas"}},
		{"attach limit", func(o *CSIOptions) { o.MaxVolumesPerNode = -1 }, []string{"max-volumes-per-node"}},
		{"device dirs", func(o *CSIOptions) { o.DeviceDirs = []string{"/ok", "rel", "/", "/var/lib/kubelet/x", "/a/../b"} },
			[]string{"device-dir", "device-dir", "device-dir", "device-dir"}},
		// Each would collide with a mount of the container: refused before anything is
		// rendered, not by the API server halfway through kubectl apply.
		{"device dirs over the container's mounts", func(o *CSIOptions) {
			o.DeviceDirs = []string{"/srv/disks", "/srv/disks", "/srv/disks/a", "/dev/disk/by-id", "/var/lib", "/csi", "/registration/x"}
		}, []string{"device-dir", "device-dir", "device-dir", "device-dir", "device-dir", "device-dir"}},
		{"device dir over an installer's mount", func(o *CSIOptions) {
			o.ReservedDirs, o.DeviceDirs = []string{"/etc/trusted"}, []string{"/etc", "/srv/disks"}
		}, []string{"device-dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultCSIOptions()
			tc.mutate(&o)
			objs, err := RenderCSI(o)
			if err == nil || objs != nil {
				t.Fatalf("RenderCSI = %d objects, %v; want an error and nothing", len(objs), err)
			}
			var list OptionErrors
			if !errors.As(err, &list) {
				t.Fatalf("error %v (%T) is not OptionErrors", err, err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Option)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("refused options %q, want %q (%v)", got, tc.want, err)
			}
		})
	}
}

// TestRenderCSI checks what the cluster depends on: the apply order, the node plugin's
// mounts (Bidirectional on kubelet's directory, the device dirs read-only), the
// controller's sidecars against the driver's socket, and the default StorageClass.
func TestRenderCSI(t *testing.T) {
	o := DefaultCSIOptions()
	o.DeviceDirs = []string{"/srv/cloud/hosts"}
	objs, err := RenderCSI(o)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var ds appsv1.DaemonSet
	var dep appsv1.Deployment
	var sc storagev1.StorageClass
	var driver storagev1.CSIDriver
	for _, u := range objs {
		kinds = append(kinds, u.GetKind())
		var into any
		switch u.GetKind() {
		case "DaemonSet":
			into = &ds
		case "Deployment":
			into = &dep
		case "StorageClass":
			into = &sc
		case "CSIDriver":
			into = &driver
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "CSIDriver", "Deployment", "DaemonSet", "StorageClass"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("kinds %q, want %q", kinds, want)
	}
	if !*driver.Spec.AttachRequired || driver.Name != CSIDriverName {
		t.Errorf("CSIDriver %s attachRequired %v", driver.Name, *driver.Spec.AttachRequired)
	}
	if sc.Annotations[defaultStorageClassAnnotation] != "true" || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
		!*sc.AllowVolumeExpansion || sc.Provisioner != CSIDriverName {
		t.Errorf("StorageClass %+v", sc)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m := mounts[kubeletDir]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("kubelet's directory mounted %+v, want Bidirectional", m)
	}
	if m, ok := mounts["/srv/cloud/hosts"]; !ok || !m.ReadOnly {
		t.Errorf("device dir mounted %+v (present %v), want read-only", m, ok)
	}
	var names []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
		if c.Name != "csi-driver" && !slices.Contains(c.Args, "--csi-address=/csi/csi.sock") {
			t.Errorf("sidecar %s args %q do not name the driver's socket", c.Name, c.Args)
		}
		if c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot {
			t.Errorf("controller container %s may run as root", c.Name)
		}
	}
	if !slices.Equal(names, []string{"csi-driver", "csi-provisioner", "csi-attacher", "csi-resizer"}) {
		t.Errorf("controller containers %q", names)
	}
	o.StorageClass = false
	objs, err = RenderCSI(o)
	if err != nil || objs[len(objs)-1].GetKind() == "StorageClass" {
		t.Errorf("without StorageClass: %v, last %s", err, objs[len(objs)-1].GetKind())
	}
}
