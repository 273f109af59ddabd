package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/wire"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

func cmdCompile(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	var packs, ontologies, pubs multiFlag
	fs.Var(&packs, "pack", "pack `FILE`, plain or signed (repeatable; the first is primary)")
	fs.Var(&ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Var(&pubs, "pub", "trusted public key `FILE`; signed packs must verify with one (repeatable)")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept plain (unsigned) packs; a signed pack is always verified")
	reqPath := fs.String("request", "", "invokeAgent request `FILE`")
	rcPath := fs.String("run-context", "", "RunContext `FILE`")
	evPath := fs.String("evidence", "", "evidence `FILE`: a JSON array of items")
	memPath := fs.String("memory", "", "memory `FILE`: a JSON array of items")
	var redactors redactorsFlag
	redactors.register(fs)
	var overlays overlayFlag
	overlays.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos compile --pack FILE [--pack FILE…] (--pub PUBFILE… | --allow-unsigned) --request FILE --run-context FILE\n       [--evidence FILE] [--memory FILE] [--ontology NS@VERSION…] [--overlay FILE…] [--redactors FILE]\n\nPrints the CompiledContext as JSON. A signed pack must verify with a --pub key; a plain\npack needs --allow-unsigned. Each pack's compatibility.requires must hold for this\nruntime (runtime "+pack.RuntimeContractVersion+", ontology: the highest --ontology). A request and\nrun context that disagree (tenant, session, trace, intent, locale, user or agent) are\nrefused as run refuses them. Invalid input exits 1 with a message naming the field or rule.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if len(packs) == 0 || *reqPath == "" || *rcPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "contextos compile: --pack, --request and --run-context are required")
		return exitUsage
	}
	if len(pubs) == 0 && !*allowUnsigned {
		fmt.Fprintln(stderr, "contextos compile: give --pub PUBFILE to verify signed packs, or --allow-unsigned for plain ones")
		return exitUsage
	}
	invalid := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "contextos compile: "+format+"\n", a...)
		return exitInvalid
	}
	if err := redactors.load(stdin); err != nil {
		return invalid("%v", err)
	}
	var keys *runcontext.StaticKeys
	if len(pubs) > 0 {
		var err error
		if keys, err = readKeys(pubs); err != nil {
			fmt.Fprintln(stderr, "contextos compile:", err)
			return exitUsage
		}
	}
	var inputs []compiler.Input
	for _, name := range packs {
		data, err := readInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "contextos compile:", err)
			return exitUsage
		}
		in, err := loadPack(data, keys, *allowUnsigned, redactors.validation())
		if err != nil {
			return invalid("%s: %v", name, err)
		}
		inputs = append(inputs, in)
	}
	reqData, err := readInput(*reqPath, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos compile:", err)
		return exitUsage
	}
	req, err := runcontext.DecodeInvokeRequest(reqData)
	if err != nil {
		return invalid("%s: %v", *reqPath, err)
	}
	rcData, err := readInput(*rcPath, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos compile:", err)
		return exitUsage
	}
	rc, err := runcontext.DecodeRunContext(rcData)
	if err != nil {
		return invalid("%s: %v", *rcPath, err)
	}
	views := make([]*pack.Pack, len(inputs))
	for i, in := range inputs {
		views[i] = in.Pack
	}
	ovs, usage, err := overlays.load(stdin, views)
	if err != nil {
		if usage {
			fmt.Fprintln(stderr, "contextos compile:", err)
			return exitUsage
		}
		return invalid("%v", err)
	}
	opts := compiler.Options{Ontologies: ontologies, Overlays: ovs, Validation: *redactors.validation()}
	ev, mem, code, ok := readEvidenceMemory("compile", *evPath, *memPath, stdin, stderr)
	if !ok {
		return code
	}
	if ev != nil {
		opts.Evidence = ev
	}
	if mem != nil {
		opts.Memory = compiler.StaticMemory(mem)
	}
	cc, err := compiler.Compile(context.Background(), inputs, req, rc, &opts)
	if err != nil {
		var ce *compiler.Error
		if errors.As(err, &ce) {
			return invalid("%v", err)
		}
		fmt.Fprintln(stderr, "contextos compile:", err)
		return exitUsage
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cc); err != nil {
		fmt.Fprintln(stderr, "contextos compile:", err)
		return exitUsage
	}
	return exitOK
}

// loadPack reads a pack: a signed one must verify with keys (there is no
// way past a signature that does not); a plain one is accepted only with
// allowUnsigned.
func loadPack(data []byte, keys *runcontext.StaticKeys, allowUnsigned bool, vopts *pack.ValidateOptions) (compiler.Input, error) {
	if isSigned(data) {
		if keys == nil {
			return compiler.Input{}, fmt.Errorf("%w: a signed pack is verified: give --pub with its signer's public key", pack.ErrSignature)
		}
		v, err := pack.Verify(context.Background(), data, keys, vopts)
		if err != nil {
			return compiler.Input{}, err
		}
		return compiler.Input{Ref: v.Ref, Pack: v.Pack, ContentHash: v.ContentHash}, nil
	}
	if !allowUnsigned {
		return compiler.Input{}, errors.New("the pack is not signed (sign it, or pass --allow-unsigned)")
	}
	p, err := pack.DecodeAndValidate(data, vopts)
	if err != nil {
		return compiler.Input{}, err
	}
	ref, err := p.Ref()
	if err != nil {
		return compiler.Input{}, err
	}
	return compiler.Input{Ref: ref, Pack: p}, nil
}

// readEvidenceMemory reads the --evidence and --memory files (each
// optional: nil when not given).
func readEvidenceMemory(cmd, evPath, memPath string, stdin io.Reader, stderr io.Writer) (compiler.StaticEvidence, []compiler.MemoryItem, int, bool) {
	var ev []compiler.EvidenceItem
	var mem []compiler.MemoryItem
	for _, f := range []struct {
		path string
		dst  any
	}{{evPath, &ev}, {memPath, &mem}} {
		if f.path == "" {
			continue
		}
		data, err := readInput(f.path, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "contextos %s: %v\n", cmd, err)
			return nil, nil, exitUsage, false
		}
		if probs, _ := wire.Decode(data, f.dst); len(probs) > 0 {
			for _, p := range probs {
				path := p.Path
				if path == "" {
					path = "(document)"
				}
				fmt.Fprintf(stderr, "contextos %s: %s: %s: %s\n", cmd, f.path, path, p.Message)
			}
			return nil, nil, exitInvalid, false
		}
	}
	if evPath == "" {
		return nil, mem, 0, true
	}
	if ev == nil {
		ev = []compiler.EvidenceItem{}
	}
	return ev, mem, 0, true
}
