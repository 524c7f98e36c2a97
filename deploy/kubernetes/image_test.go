package kubernetes_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// relayImageName is the image name the manifests run (before a
// kustomization's images: replaces it): nothing is published under it, it
// is built from this repository and loaded into the cluster.
const relayImageName = "xds-relay"

// imageDocs are the documents that tell a user how to get the image into
// a cluster before `kubectl apply -k`.
var imageDocs = []string{"README.md", "../../docs/operations.md"}

// TestImageIsWhatTheDocsBuild: the image `kubectl apply -k` runs (each
// Deployment's image with its directory's kustomization images: applied)
// is exactly the one the documents tell the user to build and load
// (`docker build -t REF .`, `kind load docker-image REF`, `minikube image
// load REF`), its tag is not latest, and it is never pulled when a loaded
// copy is present: no ImagePullBackOff on a kind or minikube cluster
// that followed the documents.
func TestImageIsWhatTheDocsBuild(t *testing.T) {
	built := documentedImage(t)
	o := loadAll(t)
	for _, d := range o.deployments {
		where := o.where[d]
		dir := filepath.Dir(where)
		k := readKustomization(t, dir)
		c := d.Spec.Template.Spec.Containers[0]
		got := applyImages(c.Image, k)
		if got != built {
			t.Errorf("%s runs %s (%s with %s's images:), but the documents build and load %s", where, got, c.Image, filepath.Join(dir, kustomizationFile), built)
		}
		if strings.HasSuffix(got, ":latest") || !strings.Contains(got, ":") {
			t.Errorf("%s runs %s: a latest tag is pulled on every start", where, got)
		}
		if c.ImagePullPolicy != corev1.PullIfNotPresent && c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: imagePullPolicy %q pulls even when the image was loaded into the cluster", where, c.ImagePullPolicy)
		}
	}
}

// documentedImage is the image reference every document names in its
// build and load commands; it fails the test when they disagree or one
// is missing.
func documentedImage(t *testing.T) string {
	t.Helper()
	commands := map[string]*regexp.Regexp{
		"docker build":           regexp.MustCompile(`(?m)^\s*(?:\$ )?docker build -t (\S+) \.\s*(?:#.*)?$`),
		"kind load docker-image": regexp.MustCompile(`(?m)^\s*(?:\$ )?kind load docker-image (\S+)\s*(?:#.*)?$`),
		"minikube image load":    regexp.MustCompile(`(?m)minikube image load (\S+?)\x60?\s`),
	}
	ref := ""
	for _, doc := range imageDocs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for what, re := range commands {
			m := re.FindAllStringSubmatch(string(data), -1)
			if len(m) == 0 {
				t.Errorf("%s does not say %q: a user cannot get the image the manifests run", doc, what)
			}
			for _, sub := range m {
				switch {
				case ref == "":
					ref = sub[1]
				case sub[1] != ref:
					t.Errorf("%s: %s %s, but elsewhere %s", doc, what, sub[1], ref)
				}
			}
		}
	}
	if ref == "" {
		t.Fatal("no document names the image to build")
	}
	return ref
}

// kustomizationImages is a kustomization's images: entries.
type kustomizationImages struct {
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

func readKustomization(t *testing.T, dir string) kustomizationImages {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, kustomizationFile))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomizationImages
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// applyImages is image as kustomize's images: leaves it.
func applyImages(image string, k kustomizationImages) string {
	name, tag, _ := strings.Cut(image, ":")
	for _, img := range k.Images {
		if img.Name != name {
			continue
		}
		if img.NewName != "" {
			name = img.NewName
		}
		if img.NewTag != "" {
			tag = img.NewTag
		}
	}
	if tag == "" {
		return name
	}
	return name + ":" + tag
}
