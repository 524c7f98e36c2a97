package config

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Demo writes the embedded demo tree into dir (as dir/config/demo/...) and
// returns the demo config with its relative file:// origins resolved
// against dir, validated. dir must be empty; the caller removes it.
func Demo(dir string) (*Config, error) {
	if err := os.CopyFS(filepath.Join(dir, "config"), demoTree); err != nil {
		return nil, fmt.Errorf("demo: write resources under %s: %w", dir, err)
	}
	c, err := decode(DemoYAML(), demoSource)
	if err != nil {
		return nil, err
	}
	for i := range c.Authorities {
		for j, o := range c.Authorities[i].Origins {
			p, ok := strings.CutPrefix(o, FileOriginPrefix)
			if ok && p != "" && !filepath.IsAbs(p) {
				c.Authorities[i].Origins[j] = FileOriginPrefix + filepath.Join(dir, p)
			}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
