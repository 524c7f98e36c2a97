package migrate

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/xds-relay/xds-relay/internal/aggregation"
)

// normalizeTemplate rewrites a replacement template so that it names only
// groups re has, with the same meaning: Regexp.Expand writes "" for a group
// that does not exist, so such a reference is dropped ("$1_x" names the
// group "1_x"). This relay's validation refuses templates naming groups
// that do not exist, which are nearly always mistakes.
func normalizeTemplate(t string, re *regexp.Regexp) string {
	exists := func(name string) bool {
		if n, err := strconv.Atoi(name); err == nil {
			return n >= 0 && n <= re.NumSubexp()
		}
		return re.SubexpIndex(name) >= 0
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] != '$' || i+1 >= len(t) {
			b.WriteByte(t[i])
			continue
		}
		switch {
		case t[i+1] == '$':
			b.WriteString("$$")
			i++
		case t[i+1] == '{':
			end := strings.IndexByte(t[i:], '}')
			name := ""
			if end > 0 {
				name = t[i+2 : i+end]
			}
			if end < 0 || !aggregation.IsTemplateName(name) {
				b.WriteString("$$") // Expand copies a malformed "$" as is
				continue
			}
			if exists(name) {
				b.WriteString(t[i : i+end+1])
			}
			i += end
		default:
			j := i + 1
			for j < len(t) && aggregation.IsTemplateNameByte(t[j]) {
				j++
			}
			if j == i+1 {
				b.WriteString("$$")
				continue
			}
			if name := t[i+1 : j]; exists(name) {
				b.WriteString("${" + name + "}")
			}
			i = j - 1
		}
	}
	return b.String()
}
