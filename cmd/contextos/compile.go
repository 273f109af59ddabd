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
	fs.Var(&pubs, "pub", "trusted public key `FILE`; signed packs are verified with these (repeatable)")
	reqPath := fs.String("request", "", "invokeAgent request `FILE`")
	rcPath := fs.String("run-context", "", "RunContext `FILE`")
	evPath := fs.String("evidence", "", "evidence `FILE`: a JSON array of items")
	memPath := fs.String("memory", "", "memory `FILE`: a JSON array of items")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos compile --pack FILE [--pack FILE…] --request FILE --run-context FILE\n       [--evidence FILE] [--memory FILE] [--ontology NS@VERSION…] [--pub PUBFILE…]\n\nPrints the CompiledContext as JSON. Invalid input exits 1 with a message naming the field or rule.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if len(packs) == 0 || *reqPath == "" || *rcPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "contextos compile: --pack, --request and --run-context are required")
		return exitUsage
	}
	invalid := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "contextos compile: "+format+"\n", a...)
		return exitInvalid
	}
	var keys *runcontext.StaticKeys
	if len(pubs) > 0 {
		keys = runcontext.NewStaticKeys(nil)
		for _, p := range pubs {
			kid, pub, _, err := readKey(p)
			if err != nil {
				fmt.Fprintln(stderr, "contextos compile:", err)
				return exitUsage
			}
			keys.Add(kid, pub)
		}
	}
	var inputs []compiler.Input
	for _, name := range packs {
		data, err := readInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "contextos compile:", err)
			return exitUsage
		}
		in, err := loadPack(data, keys)
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
	opts := compiler.Options{Ontologies: ontologies}
	if *evPath != "" {
		var items []compiler.EvidenceItem
		if code, ok := readItems(*evPath, stdin, &items, stderr); !ok {
			return code
		}
		opts.Evidence = compiler.StaticEvidence(items)
	}
	if *memPath != "" {
		var items []compiler.MemoryItem
		if code, ok := readItems(*memPath, stdin, &items, stderr); !ok {
			return code
		}
		opts.Memory = compiler.StaticMemory(items)
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

// loadPack reads a plain or signed pack; a signed one is verified when
// keys are given.
func loadPack(data []byte, keys *runcontext.StaticKeys) (compiler.Input, error) {
	var probe struct {
		Format string `json:"format"`
	}
	_ = json.Unmarshal(data, &probe)
	if probe.Format != "" {
		if keys != nil {
			v, err := pack.Verify(context.Background(), data, keys)
			if err != nil {
				return compiler.Input{}, err
			}
			return compiler.Input{Ref: v.Ref, Pack: v.Pack, ContentHash: v.ContentHash}, nil
		}
		sp, err := pack.ParseSigned(data)
		if err != nil {
			return compiler.Input{}, err
		}
		data = sp.Pack
	}
	p, err := pack.DecodeAndValidate(data)
	if err != nil {
		return compiler.Input{}, err
	}
	ref, err := p.Ref()
	if err != nil {
		return compiler.Input{}, err
	}
	return compiler.Input{Ref: ref, Pack: p}, nil
}

func readItems(name string, stdin io.Reader, dst any, stderr io.Writer) (int, bool) {
	data, err := readInput(name, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "contextos compile:", err)
		return exitUsage, false
	}
	if probs, _ := wire.Decode(data, dst); len(probs) > 0 {
		for _, p := range probs {
			path := p.Path
			if path == "" {
				path = "(document)"
			}
			fmt.Fprintf(stderr, "contextos compile: %s: %s: %s\n", name, path, p.Message)
		}
		return exitInvalid, false
	}
	return 0, true
}
