package trustfile

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode, size int) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		max     int64
		rule    Trust
		wantErr error  // nil: read
		wantMsg string // in the error
	}{
		{name: "regular, own, 0600", path: write("ok", 0o600, 10), max: 10},
		{name: "readable by all", path: write("ok644", 0o644, 10), max: 0, rule: OperatorWritten},
		{name: "FIFO, nobody writing", path: fifo, max: 10, wantErr: ErrUntrusted, wantMsg: "not a regular file"},
		{name: "directory", path: dir, max: 10, wantErr: ErrUntrusted, wantMsg: "not a regular file"},
		{name: "group writable", path: write("g", 0o620, 1), wantErr: ErrUntrusted, wantMsg: "mode 0620 lets other users write it"},
		{name: "group writable, operator's", path: write("og", 0o664, 10), rule: OperatorWritten},
		{name: "world writable", path: write("w", 0o666, 1), rule: OperatorWritten, wantErr: ErrUntrusted, wantMsg: "mode 0666"},
		{name: "over the bound", path: write("big", 0o600, 11), max: 10, wantErr: ErrTooLarge, wantMsg: "11 bytes, more than 10"},
		{name: "missing", path: filepath.Join(dir, "nope"), wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Read(tt.path, tt.max, tt.rule)
			if tt.wantErr == nil {
				if err != nil || len(data) != 10 {
					t.Fatalf("Read = %d bytes, %v; want 10 bytes", len(data), err)
				}
				sum, err := Digest(tt.path, tt.max, tt.rule)
				if err != nil || sum != sha256.Sum256(data) {
					t.Errorf("Digest = %x, %v; want the SHA-256 of what Read read", sum, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Read = %v, want %v with %q", err, tt.wantErr, tt.wantMsg)
			}
			if Refused(err) != (tt.wantErr != fs.ErrNotExist) {
				t.Errorf("Refused(%v) = %v", err, Refused(err))
			}
			if _, err := Digest(tt.path, tt.max, tt.rule); !errors.Is(err, tt.wantErr) {
				t.Errorf("Digest = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestOwner: a file of another user is refused, whichever the rule.
// Changing a file's owner needs root.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Trust{RelayWritten, OperatorWritten} {
		if _, err := Read(p, 0, r); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("rule %+v: Read of uid 12345's file = %v, want ErrUntrusted naming the owner", r, err)
		}
	}
}
