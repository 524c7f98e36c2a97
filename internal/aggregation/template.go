package aggregation

import (
	"strings"
)

// templateRefs lists the group names and numbers a replacement template
// refers to, as Regexp.Expand reads it: $name takes the longest run of
// letters, digits and underscores; ${name} is braced; $$ is a "$".
func templateRefs(t string) []string {
	var refs []string
	for i := 0; i < len(t); i++ {
		if t[i] != '$' || i+1 >= len(t) {
			continue
		}
		i++
		if t[i] == '$' {
			continue
		}
		if t[i] == '{' {
			end := strings.IndexByte(t[i:], '}')
			if end < 0 {
				continue // not a reference: Expand copies it
			}
			if name := t[i+1 : i+end]; IsTemplateName(name) {
				refs = append(refs, name)
			}
			i += end
			continue
		}
		j := i
		for j < len(t) && IsTemplateNameByte(t[j]) {
			j++
		}
		if j > i {
			refs = append(refs, t[i:j])
			i = j - 1
		}
	}
	return refs
}

// IsTemplateName reports whether s is a group name or number a
// replacement template may refer to (Regexp.Expand's rule: letters,
// digits and underscores).
func IsTemplateName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !IsTemplateNameByte(s[i]) {
			return false
		}
	}
	return true
}

// IsTemplateNameByte reports whether b may be part of a template's group
// name: $name takes the longest run of such bytes.
func IsTemplateNameByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
