package upstreame2e

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
)

// junitSample is shaped like e2e.test's junit_01.xml (ginkgo's JUnit reporter with
// OmitFailureMessageAttr): a pass, a failure, a skip with its reason, a test the focus
// left out, and the suite's setup nodes.
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="0" errors="0" failures="1" time="10">
  <testsuite name="Kubernetes e2e suite" package="/bin" tests="6" skipped="2" failures="1" errors="0" time="10">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.5"></testcase>
    <testcase name="[It] [sig-network] DNS should provide DNS for services [Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.25"></testcase>
    <testcase name="[It] [sig-network] LoadBalancers [Feature:LoadBalancer] should only allow access from service loadbalancer source ranges [Slow]" classname="Kubernetes e2e suite" status="failed" time="600">
      <failure type="failed">[FAILED] Timed out after 30.001s.&#xA;Expected pod to reach the VIP&#xA;In [It] at: k8s.io/kubernetes/test/e2e/network/loadbalancer.go:512 @ 11/26/26 18:00:00.000&#xA;</failure>
    </testcase>
    <testcase name="[It] [sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work from pods" classname="Kubernetes e2e suite" status="skipped" time="0.5">
      <skipped message="skipped - LB ingress is set to Proxy mode"></skipped>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment should not run" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="passed" time="0.1"></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	rep, err := parseJUnit(strings.NewReader(junitSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		state   State
		name    string
		message string
	}{
		{Passed, "DNS should provide DNS for services", ""},
		{Failed, "source ranges", "Timed out after 30.001s. (test/e2e/network/loadbalancer.go:512)"},
		{Skipped, "should work from pods", "LB ingress is set to Proxy mode"},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(rep.Results), len(want), rep.Results)
	}
	for i, w := range want {
		got := rep.Results[i]
		if got.State != w.state || !strings.Contains(got.Name, w.name) || got.Message != w.message {
			t.Errorf("result %d = %s %q %q, want %s, a name with %q, %q", i, got.State, got.Name, got.Message, w.state, w.name, w.message)
		}
	}
	var b strings.Builder
	if err := WriteSummary(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1 passed, 1 failed, 1 skipped") || !strings.Contains(b.String(), "| failed | [It] [sig-network] LoadBalancers") {
		t.Errorf("summary:\n%s", b.String())
	}
}

func TestParseJUnitRejectsGarbage(t *testing.T) {
	if _, err := parseJUnit(strings.NewReader("not xml")); err == nil {
		t.Error("no error for a report that is not XML")
	}
}

// TestSuitesFocus checks that the suites select what docs/conformance.md says, and that
// the two load balancer tests cloud-provider-kind skips are not skipped here.
func TestSuitesFocus(t *testing.T) {
	s := Suites(3, DefaultTimeout, false)
	if len(s) != 2 || s[0].Provider != "skeleton" || s[1].Provider != "gce" || s[1].Parallel != 1 {
		t.Fatalf("suites: %+v", s)
	}
	// With volumes, the storage suite runs between them: the cloud-provider test, which
	// deletes a node, stays last.
	v := Suites(3, DefaultTimeout, true)
	if len(v) != 3 || v[1].Name != "storage" || !v[1].Storage || v[1].Focus != StorageFocus || v[2].Name != "cloud-provider" {
		t.Fatalf("suites with volumes: %+v", v)
	}
	for _, kindOnly := range []string{"LoadBalancer.Service.without.NodePort", "type.and.ports.of.a.TCP.service"} {
		if strings.Contains(s[0].Skip, kindOnly) {
			t.Errorf("skip %q keeps kind's %s", s[0].Skip, kindOnly)
		}
	}
	for _, f := range []string{`\[Feature:LoadBalancer\]`, `\[Conformance\]`} {
		if !strings.Contains(s[0].Focus, f) {
			t.Errorf("focus %q lacks %s", s[0].Focus, f)
		}
	}
}

// TestStorageTestDriver: the definition names the driver and its StorageClass, and
// claims the attach limit only when the node plugin reports one.
func TestStorageTestDriver(t *testing.T) {
	for _, limit := range []int64{16, 0} {
		o := render.DefaultCSIOptions()
		o.MaxVolumesPerNode = limit
		data, err := StorageTestDriver(o)
		if err != nil {
			t.Fatal(err)
		}
		var def struct {
			StorageClass struct{ FromExistingClassName string }
			DriverInfo   struct {
				Name         string
				TopologyKeys []string
				Capabilities map[string]bool
			}
		}
		if err := yaml.Unmarshal(data, &def); err != nil {
			t.Fatal(err)
		}
		if def.StorageClass.FromExistingClassName != render.CSIStorageClass || def.DriverInfo.Name != render.CSIDriverName ||
			len(def.DriverInfo.TopologyKeys) != 1 || !def.DriverInfo.Capabilities["persistence"] ||
			def.DriverInfo.Capabilities["volumeLimits"] != (limit > 0) {
			t.Errorf("limit %d: definition:\n%s", limit, data)
		}
	}
}
