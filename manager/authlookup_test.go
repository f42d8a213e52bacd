package manager

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nephele-dev/nephele/manager/serving"
)

func TestLookupAuthentication(t *testing.T) {
	published := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: authConfigMapNamespace, Name: authConfigMapName},
		Data: map[string]string{
			"client-ca-file":                     "CLIENT CA",
			"requestheader-client-ca-file":       "PROXY CA",
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		},
	}
	fromCluster := serving.Config{
		ClientCA: []byte("CLIENT CA"),
		RequestHeader: serving.RequestHeaderConfig{
			ClientCA: []byte("PROXY CA"), AllowedNames: []string{"front-proxy-client"}, UsernameHeaders: []string{"X-Remote-User"},
			GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		},
	}
	fromFlags := serving.Config{ClientCAFile: "/flags/ca.crt", RequestHeader: serving.RequestHeaderConfig{ClientCAFile: "/flags/proxy.crt", UsernameHeaders: []string{"X-User"}}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, authConfigMapName, errors.New("no RBAC"))

	tests := []struct {
		name     string
		cm       *corev1.ConfigMap
		getErr   error
		cfg      serving.Config
		tolerate bool
		want     serving.Config
		wantErr  string
	}{
		{name: "fills what the flags leave out", cm: published, want: fromCluster},
		{name: "the flags win", cm: published, cfg: fromFlags, want: fromFlags},
		{name: "no ConfigMap: the flags alone", want: serving.Config{}},
		{name: "forbidden, tolerated", getErr: forbidden, tolerate: true, want: serving.Config{}},
		{name: "forbidden", getErr: forbidden, wantErr: "grant the manager's identity the kube-system/extension-apiserver-authentication-reader Role"},
		{name: "a list that is no JSON", cm: &corev1.ConfigMap{
			ObjectMeta: published.ObjectMeta,
			Data:       map[string]string{"requestheader-client-ca-file": "PROXY CA", "requestheader-username-headers": "X-Remote-User"},
		}, wantErr: "key requestheader-username-headers: want a JSON list of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.cm != nil {
				if _, err := client.CoreV1().ConfigMaps(authConfigMapNamespace).Create(context.Background(), tt.cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.getErr != nil {
				client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, kruntime.Object, error) { return true, nil, tt.getErr })
			}
			cfg := tt.cfg
			err := lookupAuthentication(context.Background(), client, &cfg, tt.tolerate, logr.Discard())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("lookup = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg, tt.want) {
				t.Errorf("config =\n%+v\nwant\n%+v", cfg, tt.want)
			}
		})
	}
}
