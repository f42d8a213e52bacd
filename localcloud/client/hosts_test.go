package client

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestHostRequests(t *testing.T) {
	ctx := context.Background()
	h := &canned{status: 201, body: `{"id":"i-000000000001","kind":"host","host":{"phase":"running","dir":"/d","log":"/d/boot.log","bootPID":42}}`}
	c := newClient(t, h)
	inst, err := c.CreateInstance(ctx, api.InstanceSpec{
		Name: "node-1", Kind: api.InstanceHost,
		BootCommand:  []string{"/bin/boot", "--x"},
		Env:          map[string]string{"A": "b"},
		PrivatePaths: []string{"/var/lib/kubelet"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !inst.IsHost() || inst.Host == nil || inst.Host.BootPID != 42 || inst.Host.Log != "/d/boot.log" {
		t.Errorf("decoded instance %+v, host %+v", inst, inst.Host)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(h.bodies[0]), &sent); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kind", "bootCommand", "env", "privatePaths"} {
		if _, ok := sent[k]; !ok {
			t.Errorf("the create request lacks %q: %s", k, h.bodies[0])
		}
	}

	h2 := &canned{status: 200, body: `{"output":"booted\n","truncated":true,"path":"/d/boot.log"}`}
	c = newClient(t, h2)
	out, err := c.Console(ctx, "i-000000000001", 100)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "booted\n" || !out.Truncated || out.Path != "/d/boot.log" {
		t.Errorf("console %+v", out)
	}
	if r := h2.request[0]; r.URL.Path != "/v1/consoles/i-000000000001" || r.URL.Query().Get("tailBytes") != "100" {
		t.Errorf("console request %s", r.URL)
	}

	// A record's JSON is what it was before hosts existed.
	raw, _ := json.Marshal(api.Instance{ID: "i-1", Name: "n", State: api.InstanceRunning})
	for _, k := range []string{"kind", "bootCommand", "env", "privatePaths", "host"} {
		if strings.Contains(string(raw), `"`+k+`"`) {
			t.Errorf("a record's JSON holds %q: %s", k, raw)
		}
	}
}
