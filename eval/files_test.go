package eval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Load reads through an os.Root: links out of the directory, files that
// are not regular, oversized files and upper-case extensions fail the
// load, naming the file and never quoting its content.
func TestLoadFileSafety(t *testing.T) {
	t.Parallel()
	good := readTestFile(t, filepath.Join(goldenDir, "flow4-replay.json"))
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // "" loads
	}{
		{"a case", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "a.json"), good) }, ""},
		{"a link inside the directory", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "sub", "real.txt"), good)
			symlink(t, filepath.Join("sub", "real.txt"), filepath.Join(dir, "a.json"))
		}, ""},
		{"a link out of the directory", func(t *testing.T, dir string) {
			symlink(t, "/etc/passwd", filepath.Join(dir, "a.json"))
		}, "a link leading out of it is refused"},
		{"a link to a device", func(t *testing.T, dir string) {
			symlink(t, "/dev/zero", filepath.Join(dir, "a.json"))
		}, "a link leading out of it is refused"},
		{"upper-case extension", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "a.JSON"), good) }, "must be .json in lower case"},
		{"too large", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a.json"), []byte(strings.Repeat(" ", MaxCaseBytes+1)))
		}, "is larger than"},
		{"not JSON", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a.json"), []byte("root:x:0:0:root:/root:/bin/bash\n"))
		}, "invalid JSON (at byte"},
		{"a directory named .json is skipped", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "d.json"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := Load(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *CaseError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCase) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(ce.File, dir) {
				t.Fatalf("Load = %v, want a *CaseError naming the file: %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "'r'") || strings.Contains(err.Error(), "root:") {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
}

func TestDecodeCasePacketPath(t *testing.T) {
	for _, tc := range []struct {
		packet string
		ok     bool
	}{
		{"packets/p.json", true},
		{"a/..b.json", true},
		{"../p.json", false},
		{"a/../../p.json", false},
		{"/etc/passwd", false},
	} {
		_, err := DecodeCase("c.json", []byte(`{"packet":"`+tc.packet+`","expect":{"status":"DECIDED"}}`))
		if (err == nil) != tc.ok {
			t.Errorf("packet %q: %v", tc.packet, err)
		}
	}
}

// FuzzDecodePacket: decoding a packet file never panics, and its errors
// never quote the JSON parser's view of the content.
func FuzzDecodePacket(f *testing.F) {
	f.Add(readTestFile(f, filepath.Join(goldenDir, "packets", "flow1.packet.json")))
	f.Add([]byte(`{"trace_id":"a","trace_id":"b"}`))
	f.Add([]byte("root:x:0:0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePacket("p.json", data)
		if err == nil && p == nil {
			t.Fatal("no packet and no error")
		}
		if err != nil && strings.Contains(err.Error(), "invalid character") {
			t.Fatalf("the error quotes the content: %v", err)
		}
	})
}
