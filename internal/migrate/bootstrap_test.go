package migrate

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseBootstrap: every setting of the earlier relay's bootstrap is
// carried over or noted with where it goes now; an unspecified origin host
// is dialled as this machine.
func TestParseBootstrap(t *testing.T) {
	example, err := os.ReadFile("testdata/bootstrap/earlier_example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    string
		want    *Bootstrap // Notes compared by setting only
		wantErr string
	}{
		{name: "the earlier relay's example", data: string(example), want: &Bootstrap{
			Listen: "0.0.0.0:9991", Admin: "0.0.0.0:6070", Origin: "127.0.0.1:18000", LogLevel: "debug",
			Notes: []Note{{Setting: "origin_server.address 0.0.0.0:18000"}, {Setting: "server.address 0.0.0.0:9991"},
				{Setting: "admin.address 0.0.0.0:6070"}, {Setting: "logging.level DEBUG"}, {Setting: "logging.path /dev/stdout"},
				{Setting: "cache.ttl 120s"}, {Setting: "cache.max_entries 100"}, {Setting: "metrics_sink.statsd 127.0.0.1:8125"}},
		}},
		{name: "origin only, by name; a level by number", data: "origin_server: {address: {address: cp.example, port_value: 80}}\nlogging: {level: 2}\n", want: &Bootstrap{
			Origin: "cp.example:80", LogLevel: "warn",
			Notes: []Note{{Setting: "origin_server.address cp.example:80"}, {Setting: "logging.level 2"}},
		}},
		{name: "IPv6 unspecified origin; a key it never had", data: "origin_server: {address: {address: \"::\", port_value: 18000}}\nzipkin: {}\n", want: &Bootstrap{
			Origin: "[::1]:18000",
			Notes:  []Note{{Setting: "origin_server.address [::]:18000"}, {Setting: "zipkin"}},
		}},
		{name: "no origin", data: "server: {address: {address: 0.0.0.0, port_value: 9991}}\n", wantErr: "origin_server.address (address and port_value) is required"},
		{name: "origin without port", data: "origin_server: {address: {address: cp}}\n", wantErr: "origin_server.address (address and port_value) is required"},
		{name: "the rules file", data: "fragments: []\n", wantErr: "this looks like the earlier relay's aggregation rules (it has fragments), not its bootstrap"},
		{name: "not YAML of a bootstrap", data: "origin_server: [1]\n", wantErr: "not the earlier relay's bootstrap: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBootstrap([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseBootstrap: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range got.Notes {
				if got.Notes[i].Now == "" {
					t.Errorf("note %q says nothing of where it goes", got.Notes[i].Setting)
				}
				got.Notes[i].Now = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		data     string
		want     FileKind
		wantKeys []string
	}{
		{"fragments: []\n", KindRules, []string{"fragments"}},
		{"origin_server: {}\nadmin: {}\n", KindBootstrap, []string{"origin_server", "admin"}},
		{"listen: x\n", KindUnknown, nil},
		{"- a\n", KindUnknown, nil},
	}
	for _, tt := range tests {
		got, keys := Kind([]byte(tt.data))
		if got != tt.want || !cmp.Equal(keys, tt.wantKeys) {
			t.Errorf("Kind(%q) = %v %v, want %v %v", tt.data, got, keys, tt.want, tt.wantKeys)
		}
	}
}
