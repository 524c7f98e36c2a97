package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a number of bytes. In YAML it is a plain integer or a string
// with a unit: "512B", "64KiB", "16MiB", "1GiB".
type ByteSize int64

// Byte size units.
const (
	B   ByteSize = 1
	KiB          = 1024 * B
	MiB          = 1024 * KiB
	GiB          = 1024 * MiB
)

var byteUnits = []struct {
	suffix string
	size   ByteSize
}{
	// Longest suffixes first: "B" ends every other one.
	{"KiB", KiB},
	{"MiB", MiB},
	{"GiB", GiB},
	{"B", B},
}

// ParseByteSize parses a plain integer or an integer followed by B, KiB, MiB
// or GiB (white space between them allowed).
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	num, unit := s, B
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || num == "" || num[0] == '+' {
		return 0, fmt.Errorf("%w: %q (want an integer with an optional unit B, KiB, MiB or GiB)", ErrByteSize, s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: %q is negative", ErrByteSize, s)
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("%w: %q overflows", ErrByteSize, s)
	}
	return ByteSize(n) * unit, nil
}

// String formats b with the largest unit that divides it exactly.
func (b ByteSize) String() string {
	switch {
	case b != 0 && b%GiB == 0:
		return strconv.FormatInt(int64(b/GiB), 10) + "GiB"
	case b != 0 && b%MiB == 0:
		return strconv.FormatInt(int64(b/MiB), 10) + "MiB"
	case b != 0 && b%KiB == 0:
		return strconv.FormatInt(int64(b/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalYAML accepts a plain integer or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: want a size such as \"16MiB\", got a %s", ErrByteSize, kindName(n.Kind))
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes b with its unit.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }
