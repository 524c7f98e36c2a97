package access

import (
	"fmt"
	"strings"
)

// Placeholders of a node identity template.
const (
	placeholderCluster = "{cluster}"
	placeholderID      = "{id}"
)

// template is a URI SAN pattern in which "{cluster}" and "{id}" stand for
// the node's cluster and id, taken literally (a '*' in a node field is no
// glob), and '*' is a glob as in Pattern.
type template struct {
	src    string
	tokens []token
}

type token struct {
	lit  string // literal text (no '*')
	star bool   // a '*'
	ph   string // a placeholder
}

// ParseTemplate parses a node identity template. It must name {cluster} or
// {id} (else it would not tie the node to the certificate); any other
// "{...}" is an error.
func ParseTemplate(s string) (template, error) {
	t := template{src: s}
	uses := false
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "*{")
		if i < 0 {
			t.tokens = append(t.tokens, token{lit: rest})
			break
		}
		if i > 0 {
			t.tokens = append(t.tokens, token{lit: rest[:i]})
		}
		rest = rest[i:]
		if rest[0] == '*' {
			t.tokens = append(t.tokens, token{star: true})
			rest = rest[1:]
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return template{}, fmt.Errorf("%q: '{' without '}'", s)
		}
		ph := rest[:end+1]
		if ph != placeholderCluster && ph != placeholderID {
			return template{}, fmt.Errorf("%q: unknown placeholder %s (want %s or %s)", s, ph, placeholderCluster, placeholderID)
		}
		t.tokens = append(t.tokens, token{ph: ph})
		uses = true
		rest = rest[end+1:]
	}
	if !uses {
		return template{}, fmt.Errorf("%q names neither %s nor %s", s, placeholderCluster, placeholderID)
	}
	return t, nil
}

// Match reports whether any of uris matches the template with the node's
// id and cluster put in. An empty node field never matches (a client that
// sends no cluster cannot claim one).
func (t *template) Match(uris []string, nodeID, cluster string) bool {
	parts := []string{""}
	for _, tok := range t.tokens {
		switch {
		case tok.star:
			parts = append(parts, "")
		case tok.ph == placeholderCluster:
			if cluster == "" {
				return false
			}
			parts[len(parts)-1] += cluster
		case tok.ph == placeholderID:
			if nodeID == "" {
				return false
			}
			parts[len(parts)-1] += nodeID
		default:
			parts[len(parts)-1] += tok.lit
		}
	}
	for _, u := range uris {
		if len(parts) == 1 && u == parts[0] || len(parts) > 1 && matchParts(parts, u) {
			return true
		}
	}
	return false
}
