package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse: no input crashes Parse, every problem it reports names a field
// (or is a YAML syntax error), and a config it accepts validates again.
// Run: go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s ./config
func FuzzParse(f *testing.F) {
	for _, file := range []string{"example.yaml", "demo/relay.yaml", "testdata/three_mistakes.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(minimalAuthorities + "cache: {max_bytes: 1GiB}\nlog: [x]\n"))
	f.Add([]byte("a: &a [1]\nb: *a\nauthorities: [{<<: {name: x}, origins: *a}]\n"))
	f.Add([]byte(mergeBomb("listn: x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("accepted config does not validate again: %v", verr)
			}
			return
		}
		for _, p := range Problems(err) {
			if p.Problem == "" || p.Source != "fuzz.yaml" {
				t.Fatalf("problem without text or source: %#v", p)
			}
			if p.Path == "" && !errors.Is(p, ErrInvalid) {
				t.Fatalf("problem without a path: %#v", p)
			}
		}
	})
}
