package docs

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// fieldsSection is the heading of docs/protocol.md's table of every field.
const fieldsSection = "## Every field of the discovery messages"

// fieldRow is a row of that table: its first cell names a field as
// `Message.field`.
var fieldRow = regexp.MustCompile("^\\| `([A-Za-z]+\\.[a-z_]+)` \\|")

// TestProtocolFieldTable keeps docs/protocol.md's field table true to the
// vendored protos: every field of the discovery messages and Resource has
// a row saying what the relay does with it, and no row names a field the
// protos do not have. A go-control-plane upgrade that adds a field fails
// here until the table says what the relay does with it.
func TestProtocolFieldTable(t *testing.T) {
	body, err := os.ReadFile("protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(body), fieldsSection+"\n")
	if !ok {
		t.Fatalf("docs/protocol.md has no section %q", fieldsSection)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		if m := fieldRow.FindStringSubmatch(line); m != nil {
			documented = append(documented, m[1])
		}
	}
	var want []string
	for _, m := range []proto.Message{
		&discoveryv3.DiscoveryRequest{}, &discoveryv3.DiscoveryResponse{},
		&discoveryv3.DeltaDiscoveryRequest{}, &discoveryv3.DeltaDiscoveryResponse{},
		&discoveryv3.ResourceError{}, &discoveryv3.Resource{}, &discoveryv3.Resource_CacheControl{},
	} {
		d := m.ProtoReflect().Descriptor()
		for i := 0; i < d.Fields().Len(); i++ {
			want = append(want, string(d.Name())+"."+string(d.Fields().Get(i).Name()))
		}
	}
	for _, f := range want {
		if !slices.Contains(documented, f) {
			t.Errorf("docs/protocol.md %q: no row for `%s`: add one saying what the relay does with it", fieldsSection, f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(want, f) {
			t.Errorf("docs/protocol.md %q: row `%s` names no field of the vendored protos: remove or rename it", fieldsSection, f)
		}
	}
	if seen := slices.Compact(slices.Sorted(slices.Values(documented))); len(seen) != len(documented) {
		t.Errorf("docs/protocol.md %q: a field has more than one row", fieldsSection)
	}
}
