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

func TestDirRegistryRecoversAPutCutOffBeforeItsState(t *testing.T) {
	reg, dir := newDirRegistry(t)
	doc := packtest.NewSigner(1).Sign(t, canonical(t))
	ref := pack.MustParseRef("ctxpack.support@1.0.0")
	docPath := filepath.Join(dir, "ctxpack.support", "1.0.0.json")
	// A crash after the document was linked in and before its state
	// file: the version is not visible, and Versions does not fail on it.
	if err := os.MkdirAll(filepath.Dir(docPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(docPath, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get(ctx, ref); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Get of the orphaned document = %v, want ErrNotFound", err)
	}
	if _, err := reg.Versions(ctx, ref.ID); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Versions with only an orphaned document = %v, want ErrNotFound", err)
	}
	// A Put of other content under the version is refused: the document
	// may be a version whose state file was lost.
	other := canonical(t)
	other.PackMeta.Description = "different content, same version"
	if _, err := reg.Put(ctx, packtest.NewSigner(1).Sign(t, other)); !errors.Is(err, pack.ErrImmutable) {
		t.Errorf("Put of other content over the orphaned document = %v, want ErrImmutable", err)
	}
	if got, err := os.ReadFile(docPath); err != nil || string(got) != string(doc) {
		t.Errorf("the orphaned document was changed: %v", err)
	}
	// Putting the same version again completes it.
	e, err := reg.Put(ctx, doc)
	if err != nil || e.State != pack.StateLinted {
		t.Fatalf("Put over the orphaned document = %+v, %v; want it stored linted", e.Ref, err)
	}
	vs, err := reg.Versions(ctx, ref.ID)
	if err != nil || len(vs) != 1 || vs[0].ContentHash != e.ContentHash {
		t.Errorf("Versions after the recovered Put = %d entries, %v", len(vs), err)
	}
	if _, err := reg.Put(ctx, doc); err != nil {
		t.Errorf("Put of the same document again = %v, want nil", err)
	}
}

// A version pinned in an environment whose state file is lost is never
// replaced by other content under its version.
func TestDirRegistryLostStateFileKeepsThePinnedContent(t *testing.T) {
	reg, dir := newDirRegistry(t)
	e := packtest.Publish(t, reg, packtest.NewSigner(1).Sign(t, canonical(t)), "rev")
	d, err := pack.NewDeployments(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "prod", e.Ref, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ctxpack.support", "1.0.0.state.json")); err != nil {
		t.Fatal(err)
	}
	other := canonical(t)
	other.PackMeta.Description = "different content, same version"
	if e2, err := reg.Put(ctx, packtest.NewSigner(1).Sign(t, other)); !errors.Is(err, pack.ErrImmutable) {
		t.Errorf("Put of other content = %s, %v; want ErrImmutable (%s is pinned in prod)", e2.ContentHash, err, e.Ref)
	}
}

func TestDirRegistryStateFileCannotClaimMoreThanTheDocument(t *testing.T) {
	reg, dir := newDirRegistry(t)
	e, err := reg.Put(ctx, packtest.Bare(t, canonical(t)))
	if err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(dir, "ctxpack.support", "1.0.0.state.json")
	for name, state := range map[string]string{
		"signed but the document is bare": `{"state":"signed","content_hash":"` + e.ContentHash + `","signed":true}`,
		"a sign-off with no reviewer":     `{"state":"linted","content_hash":"` + e.ContentHash + `","reviews":[{"reviewer":"","role":"security"}]}`,
		"a sign-off in a malformed role":  `{"state":"linted","content_hash":"` + e.ContentHash + `","reviews":[{"reviewer":"ana","role":"Sec urity"}]}`,
		"an unknown state":                `{"state":"approved","content_hash":"` + e.ContentHash + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(statePath, []byte(state), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := reg.Get(ctx, e.Ref); err == nil {
				t.Errorf("Get = state %s signed=%t, want the state file refused", got.State, got.Signed)
			}
			if _, err := reg.SetState(ctx, e.Ref, pack.StatePublished, "go"); err == nil {
				t.Error("SetState(published) succeeded on a corrupt state file")
			}
		})
	}
}

func TestSignedWithoutReviewsCannotBePublished(t *testing.T) {
	// A registry written before reviews were recorded holds a signed
	// version with no sign-offs: it cannot move on to published, through
	// any registry (they all apply Entry.Transition).
	signed, err := pack.NewEntry(packtest.NewSigner(1).Sign(t, canonical(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	signed.State = pack.StateSigned
	_, err = signed.Transition(pack.StatePublished, "go", nil)
	if !errors.Is(err, pack.ErrTransition) || !strings.Contains(err.Error(), "sign-off") {
		t.Errorf("Transition(signed without reviews → published) = %v, want ErrTransition naming the sign-offs", err)
	}
	signed.State = pack.StateReviewed
	if _, err := signed.Transition(pack.StateSigned, "", nil); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Transition(reviewed without reviews → signed) = %v, want ErrTransition", err)
	}
	// The signed version takes the missing sign-offs without going back
	// to draft, and then publishes.
	signed.State = pack.StateSigned
	all := packtest.Signoffs("team")
	reviewed, err := signed.SignOff(nil, all...)
	if err != nil || reviewed.State != pack.StateSigned || len(reviewed.Reviews) != 4 {
		t.Fatalf("SignOff on a signed version = %s with %d sign-offs, %v; want it signed with all four", reviewed.State, len(reviewed.Reviews), err)
	}
	if e, err := reviewed.Transition(pack.StatePublished, "go", nil); err != nil || e.State != pack.StatePublished {
		t.Errorf("Transition(signed with every role → published) = %s, %v", e.State, err)
	}
	// A registry that now requires another role: the signed version
	// takes that sign-off too.
	more := &pack.ValidateOptions{ReviewRoles: append(pack.DefaultReviewRoles(), "legal")}
	if _, err := reviewed.Transition(pack.StatePublished, "go", more); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Transition(published) missing the legal sign-off = %v, want ErrTransition", err)
	}
	legal, err := reviewed.SignOff(more, pack.Signoff{Reviewer: "lea", Role: "legal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legal.Transition(pack.StatePublished, "go", more); err != nil {
		t.Errorf("Transition(published) with the legal sign-off = %v", err)
	}

	// The same through a directory registry whose state file says signed.
	reg, dir := newDirRegistry(t)
	doc := packtest.NewSigner(1).Sign(t, canonical(t))
	e, err := reg.Put(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"state":"signed","content_hash":"` + e.ContentHash + `","signed":true}`
	if err := os.WriteFile(filepath.Join(dir, "ctxpack.support", "1.0.0.state.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.SetState(ctx, e.Ref, pack.StatePublished, "go"); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("directory registry: signed without reviews → published = %v, want ErrTransition", err)
	}
}

// Sign-offs recorded before a registry required a reviewer per role (one
// reviewer in several roles) do not carry a version on: the required roles
// must be matched to distinct reviewers, unless the registry allows one
// reviewer in several roles.
func TestRolesNeedDistinctReviewers(t *testing.T) {
	t.Parallel()
	so := func(who string, r pack.ReviewRole) pack.Signoff { return pack.Signoff{Reviewer: who, Role: r} }
	arch, sec, data, eval := pack.RoleArchitecture, pack.RoleSecurity, pack.RoleData, pack.RoleEvaluation
	tests := []struct {
		name    string
		reviews []pack.Signoff
		opts    *pack.ValidateOptions
		ok      bool
	}{
		{"four people", []pack.Signoff{so("ana", arch), so("bob", sec), so("cid", data), so("dee", eval)}, nil, true},
		{"one person in every role", []pack.Signoff{so("ana", arch), so("ana", sec), so("ana", data), so("ana", eval)}, nil, false},
		{"one person in every role, allowed", []pack.Signoff{so("ana", arch), so("ana", sec), so("ana", data), so("ana", eval)},
			&pack.ValidateOptions{AllowMultiRoleReviewer: true}, true},
		{"the same person in two cases", []pack.Signoff{so("ana", arch), so("ANA", sec), so("cid", data), so("dee", eval)}, nil, false},
		{"a person in two roles, another covering one of them", []pack.Signoff{so("ana", arch), so("ana", sec), so("bob", arch), so("cid", data), so("dee", eval)}, nil, true},
		{"three people for four roles", []pack.Signoff{so("ana", arch), so("ana", sec), so("bob", arch), so("bob", sec), so("cid", data), so("cid", eval)}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := pack.NewEntry(packtest.NewSigner(1).Sign(t, canonical(t)), nil)
			if err != nil {
				t.Fatal(err)
			}
			e.State, e.Reviews = pack.StateSigned, tc.reviews
			_, err = e.Transition(pack.StatePublished, "go", tc.opts)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, pack.ErrTransition) {
				t.Errorf("Transition(published) = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
