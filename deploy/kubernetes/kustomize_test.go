package kubernetes_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/xds-relay/xds-relay/config"
)

const kustomizationFile = "kustomization.yaml"

// kustomization is the part of a kustomize Kustomization these directories
// use; decoding is strict, so any other field fails the test until it is
// added here and checked.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// Each directory applies on a fresh cluster with `kubectl apply -k DIR`:
// its kustomization lists every manifest of the directory and nothing that
// does not exist, one of them is the Namespace, and every namespaced object
// lives in it.
func TestKustomizations(t *testing.T) {
	for _, dir := range []string{".", "two-tier"} {
		t.Run(dir, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, kustomizationFile))
			if err != nil {
				t.Fatal(err)
			}
			var k kustomization
			if err := yaml.UnmarshalStrict(raw, &k); err != nil {
				t.Fatalf("%s: %v", kustomizationFile, err)
			}
			if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
				t.Errorf("apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var manifests []string
			for _, f := range files {
				if filepath.Base(f) != kustomizationFile {
					manifests = append(manifests, filepath.Base(f))
				}
			}
			for _, m := range manifests {
				if !slices.Contains(k.Resources, m) {
					t.Errorf("%s is not listed in %s: kubectl apply -k would leave it out", m, kustomizationFile)
				}
			}
			var namespaces []string
			var namespaced []metav1.Object
			for _, r := range k.Resources {
				data, err := os.ReadFile(filepath.Join(dir, r))
				if err != nil {
					t.Errorf("%s lists %s: %v", kustomizationFile, r, err)
					continue
				}
				docs, err := splitDocs(data)
				if err != nil {
					t.Fatalf("%s: %v", r, err)
				}
				for _, doc := range docs {
					obj, err := decodeStrict(doc)
					if err != nil {
						t.Fatalf("%s: %v", r, err)
					}
					if ns, ok := obj.(*corev1.Namespace); ok {
						namespaces = append(namespaces, ns.Name)
						continue
					}
					namespaced = append(namespaced, obj.(metav1.Object))
				}
			}
			if len(namespaces) != 1 {
				t.Fatalf("namespaces %v: want exactly one, so the directory applies on a fresh cluster", namespaces)
			}
			for _, o := range namespaced {
				if o.GetNamespace() != namespaces[0] {
					t.Errorf("%s is in namespace %q, not the directory's %q", o.GetName(), o.GetNamespace(), namespaces[0])
				}
			}
			for _, img := range k.Images {
				if img.Name != relayImageName {
					t.Errorf("images: %q is not the relay's image (%s): the override would change nothing", img.Name, relayImageName)
				}
			}
		})
	}
}

// Every relay's admin port (metrics, debug pages, reload) is reachable only
// from inside the cluster: a NetworkPolicy selects its pods and lets in, on
// that port, only pods of the same namespace or of a namespace named by
// kubernetes.io/metadata.name; its xDS port stays open to clients.
func TestNetworkPolicyKeepsAdminInside(t *testing.T) {
	o := loadAll(t)
	for _, d := range o.deployments {
		where := o.where[d]
		pods := labels.Set(d.Spec.Template.Labels)
		var pols []*networkingv1.NetworkPolicy
		for _, p := range o.netpols {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err == nil && p.Namespace == d.Namespace && sel.Matches(pods) && slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				pols = append(pols, p)
			}
		}
		if len(pols) == 0 {
			t.Errorf("%s: no ingress NetworkPolicy selects its pods: its admin port is open to every pod of the cluster", where)
			continue
		}
		adminPort, xdsOpen := containerPort(d, "admin"), false
		for _, p := range pols {
			for _, rule := range p.Spec.Ingress {
				if covers(d, rule.Ports, "xds") {
					xdsOpen = true
				}
				if !covers(d, rule.Ports, "admin") {
					continue
				}
				if len(rule.From) == 0 {
					t.Errorf("%s: %s lets anyone reach the admin port %d", where, o.where[p], adminPort)
				}
				for _, peer := range rule.From {
					ns := peer.NamespaceSelector
					switch {
					case peer.IPBlock != nil:
						t.Errorf("%s: %s lets an IP block reach the admin port", where, o.where[p])
					case ns != nil && (len(ns.MatchExpressions) > 0 || ns.MatchLabels["kubernetes.io/metadata.name"] == "" || len(ns.MatchLabels) != 1):
						t.Errorf("%s: %s lets namespaces %v reach the admin port, not one named namespace", where, o.where[p], ns)
					}
				}
			}
		}
		if !xdsOpen {
			t.Errorf("%s: no NetworkPolicy rule lets clients reach the xds port", where)
		}
	}
}

// containerPort is the number of the relay container's port name.
func containerPort(d *appsv1.Deployment, name string) int32 {
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return -1
}

// covers reports whether a rule's ports include the container port name
// (no ports: every port).
func covers(d *appsv1.Deployment, ports []networkingv1.NetworkPolicyPort, name string) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.String() == name || p.Port.IntValue() == int(containerPort(d, name)) {
			return true
		}
	}
	return false
}

// GOMEMLIMIT is 90% of the container's memory limit (to 1 MiB): the Go
// runtime collects before the limit is hit, with room for what it does
// not count.
func TestGOMEMLIMIT(t *testing.T) {
	o := loadAll(t)
	for _, d := range o.deployments {
		where := o.where[d]
		c := d.Spec.Template.Spec.Containers[0]
		limit := c.Resources.Limits.Memory().Value()
		var env *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "GOMEMLIMIT" {
				env = &c.Env[i]
			}
		}
		if env == nil || env.Value == "" {
			t.Errorf("%s: no GOMEMLIMIT value", where)
			continue
		}
		got, err := config.ParseByteSize(env.Value)
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT %q: %v", where, env.Value, err)
			continue
		}
		want := float64(limit) * 0.9
		if math.Abs(float64(got)-want) > float64(config.MiB) {
			t.Errorf("%s: GOMEMLIMIT %s, want 90%% of the memory limit %s (%.0f MiB)", where, env.Value, c.Resources.Limits.Memory(), want/float64(config.MiB))
		}
	}
}
