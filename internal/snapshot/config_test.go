package snapshot

import (
	"testing"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestConfigFingerprint: what decides a key's meaning changes the
// fingerprint; what does not, does not.
func TestConfigFingerprint(t *testing.T) {
	base, err := config.Load("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fp := ConfigFingerprint(base)
	if fp == (Fingerprint{}) {
		t.Fatal("fingerprint of example.yaml is empty (marshaling failed)")
	}
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		same bool
	}{
		{name: "same config", edit: func(*config.Config) {}, same: true},
		{name: "cache bounds", edit: func(c *config.Config) { c.Cache.MaxResources = 7 }, same: true},
		{name: "log level", edit: func(c *config.Config) { c.Log.Level = config.LogDebug }, same: true},
		{name: "origin", edit: func(c *config.Config) { c.Authorities[0].Origins = []string{"127.0.0.1:1"} }},
		{name: "transport", edit: func(c *config.Config) { c.Authorities[0].Transport = xdstype.TransportSotW }},
		{name: "authority name", edit: func(c *config.Config) { c.Authorities[0].Name = "other.example" }},
		{name: "rule", edit: func(c *config.Config) { c.Aggregation.Rules = c.Aggregation.Rules[1:] }},
		{name: "node", edit: func(c *config.Config) { c.Node.ID = "other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load("../../config/example.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(c)
			if got := ConfigFingerprint(c) == fp; got != tc.same {
				t.Errorf("same fingerprint: %v, want %v", got, tc.same)
			}
		})
	}
}
