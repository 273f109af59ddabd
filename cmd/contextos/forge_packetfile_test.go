package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A packet file edited without sealing it again, with members respelled
// ("Status" after "status", which encoding/json reads as one, keeping the
// last), decodes to the sealed packet and passed its integrity check, so
// replay reported replay_equal for a file that shows every case-sensitive
// reader (jq, Python, a JSON Schema validator) expected.status REJECTED
// and the refund's result failed. replay must refuse it.
func TestReplayRefusesAPacketFileThatReadsTwoWays(t *testing.T) {
	dir := t.TempDir()
	packet := filepath.Join(dir, "packet.json")
	if code, _, errs := runCLI(t, "", runArgs("--replay-packet", packet)...); code != exitOK {
		t.Fatalf("run: %d %s", code, errs)
	}
	data, err := os.ReadFile(packet)
	if err != nil {
		t.Fatal(err)
	}
	replayArgs := []string{"replay", "--pack", testFile("ctxpack.support-1.0.0.json"), "--allow-unsigned"}
	if code, out, errs := runCLI(t, "", append(replayArgs, packet)...); code != exitOK || !strings.Contains(out, `"replay_equal"`) {
		t.Fatalf("replay of the untouched packet: %d %s %s", code, out, errs)
	}
	// expected.status, as written: "status": "<status>",
	at := bytes.Index(data, []byte(`"expected": {`))
	if at < 0 {
		t.Fatalf("the packet has no expected member: %.400s", data)
	}
	st := bytes.Index(data[at:], []byte(`"status": "`)) + at
	end := bytes.IndexByte(data[st+len(`"status": "`):], '"') + st + len(`"status": "`) + 1
	want := string(data[st:end])
	edited := slices.Concat(data[:st], []byte(`"status": "REJECTED", "Status"`+want[len(`"status"`):]), data[end:])
	forged := filepath.Join(dir, "forged.json")
	if err := os.WriteFile(forged, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "", append(replayArgs, forged)...); code != exitInvalid || strings.Contains(out, `"replay_equal"`) {
		t.Errorf("replay of a packet file that reads expected.status REJECTED to a case-sensitive reader: exit %d, %s %s", code, out, errs)
	}
}
