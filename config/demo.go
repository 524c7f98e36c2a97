package config

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// demoTree is config/demo: relay.yaml and the resource files it serves.
// It is embedded so that `xds-relay demo` works from any directory.
//
//go:embed all:demo
var demoTree embed.FS

// demoSource names the embedded demo config in errors.
const demoSource = "embedded config/demo/relay.yaml"

// DemoYAML returns the embedded demo config file.
func DemoYAML() []byte {
	data, err := demoTree.ReadFile("demo/relay.yaml")
	if err != nil {
		// The file is embedded at build time; a missing one is a build bug.
		panic(fmt.Sprintf("config: embedded demo config missing: %v", err))
	}
	return data
}

// DemoAddrs override the demo config's addresses; "" keeps the demo's own.
type DemoAddrs struct {
	Listen, Admin, REST string
}

// Demo is DemoWith(dir, DemoAddrs{}).
func Demo(dir string) (*Config, error) { return DemoWith(dir, DemoAddrs{}) }

// DemoWith writes the embedded demo tree into dir (as dir/config/demo/...),
// with the demo config's relative file:// origins resolved against dir and
// its addresses set from addrs, and loads that config file
// (dir/config/demo/relay.yaml): it is the Source of the returned config,
// so the demo reloads (SIGHUP, xds-relay reload) from it like any relay,
// and a user may edit it. dir must be empty; the caller removes it.
func DemoWith(dir string, addrs DemoAddrs) (*Config, error) {
	if err := os.CopyFS(filepath.Join(dir, "config"), demoTree); err != nil {
		return nil, fmt.Errorf("demo: write resources under %s: %w", dir, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(DemoYAML(), &root); err != nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: not a YAML mapping: %v", demoSource, err)
	}
	doc := root.Content[0]
	setScalar(doc, "listen", addrs.Listen)
	setScalar(doc, "admin", addrs.Admin)
	setScalar(doc, "rest_listen", addrs.REST)
	if auths := mappingValue(doc, "authorities"); auths != nil {
		for _, a := range auths.Content {
			origins := mappingValue(a, "origins")
			if origins == nil {
				continue
			}
			for _, o := range origins.Content {
				p, ok := strings.CutPrefix(o.Value, FileOriginPrefix)
				if ok && p != "" && !filepath.IsAbs(p) {
					o.Value = FileOriginPrefix + filepath.Join(dir, p)
				}
			}
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("%s: %w", demoSource, err)
	}
	path := filepath.Join(dir, "config", "demo", "relay.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return Load(path)
}

// mappingValue is the value of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// setScalar sets key of mapping n to the string value, adding the key
// when n lacks it; value "" changes nothing.
func setScalar(n *yaml.Node, key, value string) {
	if value == "" {
		return
	}
	if v := mappingValue(n, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Style, v.Content = yaml.ScalarNode, "!!str", value, yaml.DoubleQuotedStyle, nil
		return
	}
	n.Content = append(n.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: yaml.DoubleQuotedStyle})
}
