package pack_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

func TestMemoryRegistryConformance(t *testing.T) {
	packtest.RunRegistryTests(t, canonical(t), func(t *testing.T) pack.Registry { return pack.NewMemoryRegistry(nil) })
	packtest.RunLifecycleTests(t, canonical(t), func(t *testing.T, opts *pack.ValidateOptions) (pack.LifecycleRegistry, func(*testing.T) pack.LifecycleRegistry) {
		return pack.NewMemoryRegistry(opts), nil
	})
}

func newDirRegistry(t *testing.T) (*pack.DirRegistry, string) {
	dir := t.TempDir()
	reg, err := pack.OpenDirRegistry(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg, dir
}

func TestDirRegistryConformance(t *testing.T) {
	packtest.RunRegistryTests(t, canonical(t), func(t *testing.T) pack.Registry {
		reg, _ := newDirRegistry(t)
		return reg
	})
	packtest.RunLifecycleTests(t, canonical(t), func(t *testing.T, opts *pack.ValidateOptions) (pack.LifecycleRegistry, func(*testing.T) pack.LifecycleRegistry) {
		dir := t.TempDir()
		open := func(t *testing.T) pack.LifecycleRegistry {
			reg, err := pack.OpenDirRegistry(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reg.Close() })
			return reg
		}
		return open(t), open
	})
}

func TestDirRegistryLayoutAndPersistence(t *testing.T) {
	reg, dir := newDirRegistry(t)
	s := packtest.NewSigner(1)
	doc := s.Sign(t, canonical(t))
	packtest.Publish(t, reg, doc, "rev")
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	onDisk, err := os.ReadFile(filepath.Join(dir, "ctxpack.support", "1.0.0.json"))
	if err != nil || string(onDisk) != string(doc) {
		t.Fatalf("document not stored as one file per version: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "ctxpack.support"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	// A second registry on the same directory sees the state.
	again, err := pack.OpenDirRegistry(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	e, err := again.Get(ctx, ref)
	if err != nil || e.State != pack.StatePublished {
		t.Errorf("reopened Get = %+v, %v", e, err)
	}
	// A document changed on disk is refused, never served.
	if err := os.WriteFile(filepath.Join(dir, "ctxpack.support", "1.0.0.json"), append(doc[:len(doc)-2], '}', ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Get(ctx, ref); err == nil {
		t.Error("tampered document on disk was served")
	}
}

func TestDirRegistryRefusesEscapingIDs(t *testing.T) {
	reg, dir := newDirRegistry(t)
	for _, id := range []string{"..", ".", ".hidden", "..:x"} {
		ref := pack.Ref{ID: id, Major: 1}
		if _, err := reg.Get(ctx, ref); !errors.Is(err, pack.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := reg.Versions(ctx, id); !errors.Is(err, pack.ErrNotFound) {
			t.Errorf("Versions(%q) = %v, want ErrNotFound", id, err)
		}
	}
	// A pack whose id would climb out of the directory cannot be stored.
	p := canonical(t)
	p.PackMeta.PackID = ".."
	p.ContractMeta.ContractName = ".."
	if _, err := reg.Put(ctx, packtest.Bare(t, p)); err == nil {
		t.Error("pack id .. accepted")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "1.0.0.json")); err == nil {
		t.Error("a file was written outside the registry directory")
	}
}
