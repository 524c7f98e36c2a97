package config

import "testing"

func TestCSDSListen(t *testing.T) {
	// Every case is minimalAuthorities (lines 1-3) plus the lines shown.
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "off by default", extra: ""},
		{name: "an address of its own", extra: "csds_listen: 127.0.0.1:18002\n"},
		{name: "port 0 beside port 0", extra: "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\ncsds_listen: 127.0.0.1:0\n"},
		{name: "not host:port", extra: "csds_listen: nope\n",
			want: []problem{{"csds_listen", 4, `"nope" is not host:port`}}},
		{name: "same as listen", extra: "listen: 127.0.0.1:7\ncsds_listen: 127.0.0.1:7\n",
			want: []problem{{"csds_listen", 5, "same address as listen (127.0.0.1:7)"}}},
		{name: "same as admin", extra: "admin: 127.0.0.1:8\ncsds_listen: 127.0.0.1:8\n",
			want: []problem{{"csds_listen", 5, "same address as admin"}}},
		{name: "same as rest_listen", extra: "rest_listen: 127.0.0.1:9\ncsds_listen: 127.0.0.1:9\n",
			want: []problem{{"csds_listen", 5, "same address as rest_listen"}}},
		{name: "not a string", extra: "csds_listen: [a]\n",
			want: []problem{{"csds_listen", 4, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
			if tt.extra == "" && (err != nil || c.CSDSListen != "") {
				t.Errorf("default csds_listen %q (err %v), want off", c.CSDSListen, err)
			}
		})
	}
}
