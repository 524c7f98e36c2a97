package downstream

import (
	"errors"
	"net/url"
	"sort"
	"strings"
)

// parseXDSTP is a stand-in until internal/xdsname lands.
func parseXDSTP(s string) (xdstpName, error) {
	u, err := url.Parse(s)
	if err != nil {
		return xdstpName{}, err
	}
	if u.Scheme != "xdstp" {
		return xdstpName{}, errors.New("not xdstp")
	}
	p := strings.TrimPrefix(u.Path, "/")
	i := strings.IndexByte(p, '/')
	if i <= 0 || i == len(p)-1 {
		return xdstpName{}, errors.New("missing type or id")
	}
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("xdstp://" + u.Host + "/" + p)
	for j, k := range keys {
		if j == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(k + "=" + q.Get(k))
	}
	return xdstpName{authority: u.Host, resourceType: p[:i], canonical: b.String(), glob: strings.HasSuffix(p, "/*")}, nil
}
