package config

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "1234", want: 1234},
		{in: "512B", want: 512},
		{in: "64KiB", want: 64 * 1024},
		{in: "16MiB", want: 16 << 20},
		{in: "256 MiB", want: 256 << 20},
		{in: "2GiB", want: 2 << 30},
		{in: " 1 GiB ", want: 1 << 30},
		{in: "8589934591GiB", want: 8589934591 << 30},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "1.5MiB", wantErr: true},
		{in: "1MB", wantErr: true},
		{in: "1mib", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "8589934592GiB", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseByteSize(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrByteSize) {
					t.Errorf("ParseByteSize(%q) = %v, %v; want an ErrByteSize", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestByteSizeString(t *testing.T) {
	tests := []struct {
		in   ByteSize
		want string
	}{
		{0, "0B"},
		{1000, "1000B"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{16 * MiB, "16MiB"},
		{3 * GiB, "3GiB"},
		{GiB + MiB, "1025MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := tt.in.String()
			if got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseByteSize(got)
			if err != nil || back != tt.in {
				t.Errorf("ParseByteSize(String()) = %d, %v; want %d", back, err, tt.in)
			}
		})
	}
}

func TestByteSizeYAML(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    ByteSize
		wantErr bool
	}{
		{name: "integer", yaml: "v: 1048576", want: MiB},
		{name: "quoted unit", yaml: `v: "16MiB"`, want: 16 * MiB},
		{name: "bare unit", yaml: "v: 64KiB", want: 64 * KiB},
		{name: "list", yaml: "v: [1]", wantErr: true},
		{name: "float", yaml: "v: 1.5", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				V ByteSize `yaml:"v"`
			}
			err := yaml.Unmarshal([]byte(tt.yaml), &v)
			if (err != nil) != tt.wantErr || (!tt.wantErr && v.V != tt.want) {
				t.Errorf("Unmarshal(%q) = %d, %v; want %d, error %v", tt.yaml, v.V, err, tt.want, tt.wantErr)
			}
		})
	}
	out, err := yaml.Marshal(struct {
		V ByteSize `yaml:"v"`
	}{V: 256 * MiB})
	if err != nil || string(out) != "v: 256MiB\n" {
		t.Errorf("Marshal = %q, %v; want %q", out, err, "v: 256MiB\n")
	}
}
