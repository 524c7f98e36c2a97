package migrate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// Any rules file the earlier relay would load either is refused with a
// reason or converts into rules that validate and that group generated
// requests exactly as the earlier relay did.
func FuzzConvertVerify(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := legacykey.Parse(data)
		if err != nil {
			return
		}
		conv, err := Convert(c, "legacy")
		if err != nil {
			if !errors.Is(err, ErrNotConvertible) {
				t.Fatalf("Convert: %v, not a refusal", err)
			}
			return
		}
		if problems := aggregation.Validate(conv.Rules, []string{"legacy"}); len(problems) > 0 {
			t.Fatalf("converted rules do not validate: %v", problems)
		}
		if len(conv.Rules) > 300 {
			return // valid; too slow to replay here
		}
		rep, err := Verify(c, conv.Rules, Generate(c, 300, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Differences) > 0 {
			t.Fatalf("%d differences; the first: %v", len(rep.Differences), rep.Differences[0])
		}
	})
}
