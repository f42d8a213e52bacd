package controllers

import (
	"errors"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// TestInvalidSpecKeepsTheChain: a spec the profile cannot render is Degraded at once
// with InvalidSpec and a message naming the spec's field, and the error behind it still
// holds the *profiles.FieldError and deploy/render's *render.OptionError.
func TestInvalidSpecKeepsTheChain(t *testing.T) {
	p, err := profiles.Load("local")
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.CloudControllerManagerSpec{Platform: "local", ExtraArgs: []string{"--v=2", "--cluster-cidr=10.0.0.0/8"}}
	_, err = profiles.Render(p, profiles.Input{Spec: spec, Namespace: "kube-system", DefaultVersion: "dev"})
	if err == nil {
		t.Fatal("rendered")
	}
	term := &terminal{ReasonInvalidSpec, err}
	out := NewOperand(Config{}).failed(term)
	if !out.degraded || out.degReason != ReasonInvalidSpec || !strings.HasPrefix(out.degMsg, "spec.extraArgs[1]: ") {
		t.Errorf("outcome degraded=%t %s %q; want Degraded InvalidSpec naming spec.extraArgs[1]", out.degraded, out.degReason, out.degMsg)
	}
	var fe *profiles.FieldError
	var oe *render.OptionError
	if !errors.As(term, &fe) || fe.Field.String() != "spec.extraArgs[1]" || !errors.As(term, &oe) || oe.Option != "extra-arg" {
		t.Errorf("the chain is lost: FieldError %+v, OptionError %+v", fe, oe)
	}
}
