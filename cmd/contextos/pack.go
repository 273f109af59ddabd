package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func packCommands() []command {
	return []command{
		{"validate", "run every validation gate on pack files", cmdPackValidate},
		{"keygen", "write an Ed25519 key pair named by its kid", cmdPackKeygen},
		{"sign", "print the signed pack file of a pack", cmdPackSign},
		{"verify", "verify a signed pack file", cmdPackVerify},
		{"diff", "classify the change between two pack versions", cmdPackDiff},
		{"test", "run the CI checklist: gates, golden cases, evaluators, release gates, diff", cmdPackTest},
	}
}

func cmdPack(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("contextos pack", packCommands(), args, stdin, stdout, stderr)
}

// fileProblem is one line of pack validate's report: a problem (severity
// error, the pack is invalid) or a warning (the pack is valid).
type fileProblem struct {
	File     string `json:"file,omitempty"`
	Severity string `json:"severity"`
	pack.Problem
}

// Severities of pack validate's report.
const (
	severityError   = "error"
	severityWarning = "warning"
)

func cmdPackValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack validate", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the problems and warnings as a JSON array")
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack validate [--json] [--redactors FILE] FILE...\n\nRuns every validation gate. For each pack: one 'gate: path: message' line per problem,\none 'warning: gate: path: message' line per warning (a risk the pack is valid with,\nand its fix), then 'valid' or 'invalid' with the counts; each line is prefixed with\nthe file name when several files are given. --json prints one array of them, each\nwith its file, severity (error or warning), gate, code, path and message.\nExit 0: every pack is valid (warnings or not); 1: a pack has a problem.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "contextos pack validate: at least one FILE is required")
		return exitUsage
	}
	if err := redactors.load(stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack validate:", err)
		return exitInvalid
	}
	all := []fileProblem{}
	invalid := false
	var summaries []string
	for _, name := range fs.Args() {
		data, err := readInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack validate:", err)
			return exitUsage
		}
		var probs, warns []pack.Problem
		p, err := pack.Decode(data)
		if err == nil {
			warns = pack.Warnings(p)
			err = pack.Validate(p, redactors.validation())
		}
		var ve *pack.ValidationError
		if errors.As(err, &ve) {
			probs = ve.Problems
		} else if err != nil {
			fmt.Fprintln(stderr, "contextos pack validate:", err)
			return exitUsage
		}
		for _, q := range probs {
			all = append(all, fileProblem{File: name, Severity: severityError, Problem: q})
		}
		for _, q := range warns {
			all = append(all, fileProblem{File: name, Severity: severityWarning, Problem: q})
		}
		invalid = invalid || len(probs) > 0
		summaries = append(summaries, verdict(len(probs), len(warns)))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(all); err != nil {
			fmt.Fprintln(stderr, "contextos pack validate:", err)
			return exitUsage
		}
	} else {
		prefix := func(file string) {
			if fs.NArg() > 1 {
				fmt.Fprintf(stdout, "%s: ", file)
			}
		}
		next := 0
		for i, name := range fs.Args() {
			for ; next < len(all) && all[next].File == name; next++ {
				prefix(name)
				if all[next].Severity == severityWarning {
					fmt.Fprint(stdout, "warning: ")
				}
				fmt.Fprintln(stdout, all[next].Problem.String())
			}
			prefix(name)
			fmt.Fprintln(stdout, summaries[i])
		}
	}
	if invalid {
		return exitInvalid
	}
	return exitOK
}

// verdict is pack validate's summary line of one pack.
func verdict(problems, warnings int) string {
	out := "valid"
	if problems > 0 {
		out = "invalid, " + plural(problems, "problem")
	}
	if warnings > 0 {
		out += ", " + plural(warnings, "warning")
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func cmdPackKeygen(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack keygen", flag.ContinueOnError)
	out := fs.String("out", "", "write <kid>.key and <kid>.pub into `DIR`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack keygen --out DIR\n\nWrites an Ed25519 key pair: DIR/<kid>.key (private, mode 0600) and DIR/<kid>.pub.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "contextos pack keygen: --out DIR is required and takes no arguments")
		return exitUsage
	}
	priv, pub, err := pack.GenerateKey(nil)
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack keygen:", err)
		return exitUsage
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "contextos pack keygen:", err)
		return exitUsage
	}
	for _, f := range []struct {
		kf   pack.KeyFile
		ext  string
		mode os.FileMode
	}{{priv, ".key", 0o600}, {pub, ".pub", 0o644}} {
		b, _ := json.MarshalIndent(f.kf, "", "  ")
		p := filepath.Join(*out, f.kf.Kid+f.ext)
		file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack keygen:", err)
			return exitUsage
		}
		_, werr := file.Write(append(b, '\n'))
		if cerr := file.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			fmt.Fprintln(stderr, "contextos pack keygen:", werr)
			return exitUsage
		}
		fmt.Fprintln(stdout, p)
	}
	return exitOK
}

// readKeys trusts the public keys in the files.
func readKeys(paths []string) (*runcontext.StaticKeys, error) {
	keys := runcontext.NewStaticKeys(nil)
	for _, p := range paths {
		kid, pub, _, err := readKey(p)
		if err != nil {
			return nil, err
		}
		keys.Add(kid, pub)
	}
	return keys, nil
}

// isSigned reports whether a pack file is a signed pack file (it has a
// format) rather than a plain pack document.
func isSigned(data []byte) bool {
	var probe struct {
		Format string `json:"format"`
	}
	_ = json.Unmarshal(data, &probe)
	return probe.Format != ""
}

func readKey(path string) (kid string, pub ed25519.PublicKey, priv ed25519.PrivateKey, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, err
	}
	return pack.ParseKeyFile(b)
}

func cmdPackSign(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack sign", flag.ContinueOnError)
	keyPath := fs.String("key", "", "private key `FILE` written by keygen")
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack sign --key KEYFILE [--redactors FILE] PACK\n\nPrints the signed pack file on stdout. Only a pack that passes every gate is signed.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *keyPath == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "contextos pack sign: --key KEYFILE and one PACK are required")
		return exitUsage
	}
	if err := redactors.load(stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack sign:", err)
		return exitInvalid
	}
	kid, _, priv, err := readKey(*keyPath)
	if err == nil && priv == nil {
		err = errors.New("key file holds no private key")
	}
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack sign:", err)
		return exitUsage
	}
	data, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack sign:", err)
		return exitUsage
	}
	p, err := pack.Decode(data)
	var signed []byte
	if err == nil {
		signed, err = pack.Sign(p, kid, priv, redactors.validation())
	}
	var ve *pack.ValidationError
	if errors.As(err, &ve) {
		for _, q := range ve.Problems {
			fmt.Fprintln(stderr, q.String())
		}
		return exitInvalid
	} else if err != nil {
		fmt.Fprintln(stderr, "contextos pack sign:", err)
		return exitUsage
	}
	stdout.Write(signed)
	return exitOK
}

func cmdPackVerify(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack verify", flag.ContinueOnError)
	var pubs multiFlag
	fs.Var(&pubs, "pub", "trusted public key `FILE` (repeatable)")
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack verify --pub PUBFILE [--pub PUBFILE…] [--redactors FILE] SIGNED\n\nExit 0 and 'verified REF CONTENT_HASH KID' when the signature, content and gates hold;\nexit 1 with the reason otherwise.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if len(pubs) == 0 || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "contextos pack verify: --pub PUBFILE and one SIGNED file are required")
		return exitUsage
	}
	if err := redactors.load(stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack verify:", err)
		return exitInvalid
	}
	keys, err := readKeys(pubs)
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack verify:", err)
		return exitUsage
	}
	data, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack verify:", err)
		return exitUsage
	}
	v, err := pack.Verify(context.Background(), data, keys, redactors.validation())
	if err != nil {
		fmt.Fprintln(stdout, "invalid:", err)
		return exitInvalid
	}
	fmt.Fprintf(stdout, "verified %s %s %s\n", v.Ref, v.ContentHash, v.Kid)
	return exitOK
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func cmdPackDiff(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack diff", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack diff [--json] [--redactors FILE] OLD NEW\n\nPrints the version class (patch, minor, major, reject) and its reasons.\nExit 1 for a reject or a version bump too small for the class.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "contextos pack diff: OLD and NEW are required")
		return exitUsage
	}
	if err := redactors.load(stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack diff:", err)
		return exitInvalid
	}
	var packs [2]*pack.Pack
	for i, name := range fs.Args() {
		data, err := readInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack diff:", err)
			return exitUsage
		}
		if sp, err := pack.ParseSigned(data); err == nil {
			data = sp.Pack
		}
		p, err := pack.Decode(data)
		if err != nil {
			fmt.Fprintf(stderr, "contextos pack diff: %s: %v\n", name, err)
			return exitInvalid
		}
		packs[i] = p
	}
	res := pack.Diff(packs[0], packs[1], redactors.validation())
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(res)
	} else {
		fmt.Fprintf(stdout, "class: %s\n", res.Class)
		if res.VersionOK {
			fmt.Fprintf(stdout, "version: ok (%s → %s)\n", packs[0].PackMeta.PackVersion, packs[1].PackMeta.PackVersion)
		} else {
			fmt.Fprintf(stdout, "version: insufficient: %s\n", res.Version)
		}
		for _, c := range res.Changes {
			fmt.Fprintf(stdout, "%s: %s: %s\n", c.Class, c.Path, c.Reason)
		}
	}
	if res.Class == pack.ClassReject || !res.VersionOK {
		return exitInvalid
	}
	return exitOK
}
