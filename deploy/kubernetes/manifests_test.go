package kubernetes_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/xds-relay/xds-relay/config"
)

// manifest is one decoded document, named by file and position.
type manifest struct {
	where string // "deployment.yaml#1"
	obj   any
}

// objects is every manifest under this directory, decoded by kind.
type objects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	pdbs        []*policyv1.PodDisruptionBudget
	namespaces  []*corev1.Namespace
	netpols     []*networkingv1.NetworkPolicy
	where       map[any]string
}

// decodeStrict decodes one YAML document into the API type its kind names,
// refusing unknown and duplicate fields.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("type meta: %w", err)
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Namespace":
		obj = &corev1.Namespace{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	default:
		return nil, fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// splitDocs splits a multi-document YAML file, dropping empty documents.
func splitDocs(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

func loadAll(t *testing.T) *objects {
	t.Helper()
	o := &objects{where: make(map[any]string)}
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == kustomizationFile {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs, err := splitDocs(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, doc := range docs {
			obj, err := decodeStrict(doc)
			if err != nil {
				t.Errorf("%s document %d: %v", path, i+1, err)
				continue
			}
			n++
			o.where[obj] = fmt.Sprintf("%s#%d", path, i+1)
			switch v := obj.(type) {
			case *appsv1.Deployment:
				o.deployments = append(o.deployments, v)
			case *corev1.Service:
				o.services = append(o.services, v)
			case *corev1.ConfigMap:
				o.configMaps = append(o.configMaps, v)
			case *policyv1.PodDisruptionBudget:
				o.pdbs = append(o.pdbs, v)
			case *corev1.Namespace:
				o.namespaces = append(o.namespaces, v)
			case *networkingv1.NetworkPolicy:
				o.netpols = append(o.netpols, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no manifests found")
	}
	return o
}

// TestManifestsDecodeStrictly decodes every manifest into its Kubernetes
// API type with unknown fields refused.
func TestManifestsDecodeStrictly(t *testing.T) {
	o := loadAll(t)
	if len(o.deployments) < 3 || len(o.services) < 3 || len(o.configMaps) < 3 || len(o.pdbs) < 3 || len(o.namespaces) != 2 || len(o.netpols) < 3 {
		t.Errorf("want the single-tier set and both two-tier sets, and a namespace for each directory: %d deployments, %d services, %d configmaps, %d PDBs, %d namespaces, %d network policies",
			len(o.deployments), len(o.services), len(o.configMaps), len(o.pdbs), len(o.namespaces), len(o.netpols))
	}
}

// TestStrictDecodingRefusesMisspeltField proves the decoding above would
// catch a typo: a Deployment with "replica" for "replicas".
func TestStrictDecodingRefusesMisspeltField(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 3\n")
	_, err := decodeStrict(doc)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("decodeStrict(misspelt) = %v, want an error naming the unknown field", err)
	}
}

// TestDeploymentsAreProductionReady checks what the README promises of
// every relay Deployment: probes, non-root, read-only root, requests, a
// config from a ConfigMap that the relay itself accepts, and a termination
// grace longer than the relay's own shutdown.
func TestDeploymentsAreProductionReady(t *testing.T) {
	o := loadAll(t)
	cms := make(map[string]*corev1.ConfigMap)
	for _, cm := range o.configMaps {
		cms[cm.Namespace+"/"+cm.Name] = cm
	}
	for _, d := range o.deployments {
		where := o.where[d]
		spec := d.Spec.Template.Spec
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not match the pod labels %v", where, d.Spec.Selector, d.Spec.Template.Labels)
		}
		if ps := spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", where)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", where, len(spec.Containers))
		}
		c := spec.Containers[0]
		ports := make(map[string]int32)
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		probe := func(name string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", where, name)
				return
			}
			if p.HTTPGet.Path != path {
				t.Errorf("%s: %s probe on %q, want %q", where, name, p.HTTPGet.Path, path)
			}
			if _, ok := ports[p.HTTPGet.Port.String()]; !ok {
				t.Errorf("%s: %s probe port %q is not a container port (%v)", where, name, p.HTTPGet.Port.String(), ports)
			}
		}
		probe("liveness", c.LivenessProbe, "/healthz")
		probe("readiness", c.ReadinessProbe, "/readyz")
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container root filesystem is not read-only", where)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container allows privilege escalation", where)
		}
		req := c.Resources.Requests
		if req.Cpu().IsZero() || req.Memory().IsZero() {
			t.Errorf("%s: no cpu and memory requests: %v", where, req)
		}
		if lim := c.Resources.Limits.Memory(); lim.IsZero() || lim.Cmp(*req.Memory()) < 0 {
			t.Errorf("%s: memory limit %v below the request %v", where, lim, req.Memory())
		}

		// The config: a ConfigMap volume mounted where --config points,
		// holding a config the relay validates.
		cfgPath := ""
		for i, a := range c.Args {
			if a == "--config" && i+1 < len(c.Args) {
				cfgPath = c.Args[i+1]
			}
		}
		if cfgPath == "" || c.Args[0] != "serve" {
			t.Fatalf("%s: args %v, want serve --config FILE", where, c.Args)
		}
		var cm *corev1.ConfigMap
		for _, m := range c.VolumeMounts {
			if filepath.Dir(cfgPath) != m.MountPath {
				continue
			}
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					cm = cms[d.Namespace+"/"+v.ConfigMap.Name]
				}
			}
		}
		if cm == nil {
			t.Fatalf("%s: %s is not mounted from a ConfigMap in these manifests", where, cfgPath)
		}
		data, ok := cm.Data[filepath.Base(cfgPath)]
		if !ok {
			t.Fatalf("%s: ConfigMap %s has no key %q", where, cm.Name, filepath.Base(cfgPath))
		}
		cfg, err := config.Parse([]byte(data), o.where[cm])
		if err != nil {
			t.Fatalf("%s: the relay refuses its config: %v", where, err)
		}
		// A ConfigMap update reaches the relay: it watches the file, and
		// the volume is mounted whole (a subPath mount is never updated).
		if !cfg.ConfigWatch {
			t.Errorf("%s: config_watch is off: a ConfigMap update would need a restart or a signal", where)
		}
		for _, m := range c.VolumeMounts {
			if filepath.Dir(cfgPath) == m.MountPath && m.SubPath != "" {
				t.Errorf("%s: the config is mounted with subPath %q, which Kubernetes never updates", where, m.SubPath)
			}
		}
		if cfg.PlainNamesAuthority() < 0 {
			t.Errorf("%s: no authority serves plain names: an Envoy fleet's wildcard LDS and CDS would be refused", where)
		}
		if _, port, _ := strings.Cut(cfg.Listen, ":"); port != fmt.Sprint(ports["xds"]) || !strings.HasPrefix(cfg.Listen, ":") {
			t.Errorf("%s: listen %q, want every interface on the xds container port %d", where, cfg.Listen, ports["xds"])
		}
		if _, port, _ := strings.Cut(cfg.Admin, ":"); port != fmt.Sprint(ports["admin"]) || !strings.HasPrefix(cfg.Admin, ":") {
			t.Errorf("%s: admin %q, want every interface on the admin container port %d (probes)", where, cfg.Admin, ports["admin"])
		}
		grace := spec.TerminationGracePeriodSeconds
		if need := (cfg.Downstream.DrainDelay + cfg.ShutdownGracePeriod).Seconds(); grace == nil || float64(*grace) <= need {
			t.Errorf("%s: terminationGracePeriodSeconds %v is not longer than the relay's drain delay and shutdown grace (%.0fs)", where, grace, need)
		}

		// Something routes to it and bounds its disruption.
		if !selectedBy(o, d) {
			t.Errorf("%s: no Service and PodDisruptionBudget both select its pods", where)
		}
	}
}

func selectedBy(o *objects, d *appsv1.Deployment) bool {
	pods := labels.Set(d.Spec.Template.Labels)
	svc, pdb := false, false
	for _, s := range o.services {
		if s.Namespace == d.Namespace && len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(pods) {
			svc = true
		}
	}
	for _, p := range o.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err == nil && p.Namespace == d.Namespace && sel.Matches(pods) {
			pdb = true
		}
	}
	return svc && pdb
}

// TestTwoTierEdgeReadsCentral checks the two-tier example is wired: every
// origin of the edge relays is the central tier's Service, by its cluster
// DNS name and xds port.
func TestTwoTierEdgeReadsCentral(t *testing.T) {
	o := loadAll(t)
	services := make(map[string]bool)
	for _, s := range o.services {
		for _, p := range s.Spec.Ports {
			services[fmt.Sprintf("%s.%s.svc.cluster.local:%d", s.Name, s.Namespace, p.Port)] = true
		}
	}
	found := false
	for _, cm := range o.configMaps {
		if cm.Name != "xds-relay-edge" {
			continue
		}
		found = true
		cfg, err := config.Parse([]byte(cm.Data["config.yaml"]), o.where[cm])
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cfg.Authorities {
			for _, origin := range a.Origins {
				if !services[origin] || !strings.HasPrefix(origin, "xds-relay-central.") {
					t.Errorf("%s: authority %s origin %q is not the central relays' Service", o.where[cm], a.Name, origin)
				}
			}
		}
	}
	if !found {
		t.Fatal("two-tier example: no xds-relay-edge ConfigMap")
	}
}
