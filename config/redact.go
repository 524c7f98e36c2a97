package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RedactedValue replaces what Redacted hides.
const RedactedValue = "<redacted>"

// secretKey matches the config keys whose values are secrets: a token, a
// password, a private key... given inline. Keys naming a file or
// directory that holds one (bearer_token_file, key_file) are paths and
// shown; the file's content never is.
var secretKey = regexp.MustCompile(`(?i)(token|secret|passw|credential|private|api_?key|bearer|authorization|cookie|signature)`)

// pathKey: keys whose value is where a secret lives, not the secret.
var pathKey = regexp.MustCompile(`(?i)(_file|_files|_path|_paths|_dir)$`)

// identKey: config keys are snake_case identifiers. Other mapping keys
// (type URLs under allow_by_type, metadata values) are data, never taken
// for a secret's name.
var identKey = regexp.MustCompile(`^[a-z0-9_]+$`)

// urlPassword matches the password of user:password@ in a URL.
var urlPassword = regexp.MustCompile(`(://[^/@\s:]*):[^/@\s]*@`)

// Redacted returns c as YAML (the file's keys), with every secret-looking
// value replaced by RedactedValue: values of keys that name a secret
// (token, password, secret, private key, ... but not their _file or _path),
// PEM blocks anywhere, and passwords in URLs. It is what /debug/config
// serves; new fields are covered by their names, without a list to keep.
func Redacted(c *Config) ([]byte, error) {
	n, err := redactedNode(c)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("config: encode redacted: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode redacted: %w", err)
	}
	return buf.Bytes(), nil
}

// RedactedJSON is Redacted as JSON.
func RedactedJSON(c *Config) ([]byte, error) {
	n, err := redactedNode(c)
	if err != nil {
		return nil, err
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("config: redacted to JSON: %w", err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("config: redacted to JSON: %w", err)
	}
	return out, nil
}

func redactedNode(c *Config) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	redactNode(&n, false)
	return &n, nil
}

// redactNode hides the secrets in n; secret says n is the value of a
// secret key (every string in it is hidden).
func redactNode(n *yaml.Node, secret bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" && n.Tag != "" || n.Value == "" {
			return // numbers, booleans, null: nothing to hide
		}
		switch {
		case secret, strings.Contains(n.Value, "-----BEGIN"):
			n.Value, n.Style = RedactedValue, 0
		default:
			n.Value = urlPassword.ReplaceAllString(n.Value, "$1:"+RedactedValue+"@")
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			redactNode(n.Content[i+1], secret || isSecretKey(k))
		}
	default: // documents, sequences, aliases
		for _, c := range n.Content {
			redactNode(c, secret)
		}
	}
}

func isSecretKey(k string) bool {
	return identKey.MatchString(k) && secretKey.MatchString(k) && !pathKey.MatchString(k)
}
