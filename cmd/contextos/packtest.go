package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/contextos/contextos/eval"
)

// cmdPackTest runs the CI checklist of seed 003 on a pack: what a pack
// repository's CI runs on every change.
func cmdPackTest(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pack test", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	baseline := fs.String("baseline", "", "the released pack `FILE` to diff against and hold the release gates to")
	golden := fs.String("golden", "", "golden case `DIR` (one JSON file per case); required: a pack is never passed without evidence")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept plain (unsigned) packs")
	var pubs, ontologies, triggers multiFlag
	fs.Var(&pubs, "pub", "trusted public key `FILE`; signed packs are verified with these (repeatable)")
	fs.Var(&ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.Var(&triggers, "trigger", "run only the checks a refresh `TRIGGER` requires (repeatable): "+triggerNames())
	var redactors redactorsFlag
	redactors.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos pack test --golden DIR [--baseline PACK] [--pub PUBFILE… | --allow-unsigned]\n       [--ontology NS@VERSION…] [--trigger TRIGGER…] [--redactors FILE] [--json] PACK\n\nRuns the CI checklist in order: schema, references, policy, security, tool manifest against\nthe expected minimal surface, golden compiles, replay of incident and correction cases,\nthe evaluators against the pack's targets, the release gates against the baseline, and\nthe diff by layer. Prints the report with the scorecard. Given a baseline, the pack is\nheld to the stricter of the baseline's eval targets and release gates and its own.\nA validation problem fails the report whatever the triggers select; a golden directory\nwithout cases fails the golden steps. At most one input may be - (stdin).\nExit 0 when every gate passes; 1 when one fails.")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "contextos pack test: one PACK file is required")
		return exitUsage
	}
	if *golden == "" {
		fmt.Fprintln(stderr, "contextos pack test: --golden DIR is required (the golden cases the pack is tested on)")
		return exitUsage
	}
	baselineGiven := false
	fs.Visit(func(f *flag.Flag) { baselineGiven = baselineGiven || f.Name == "baseline" })
	if baselineGiven && *baseline == "" {
		fmt.Fprintln(stderr, "contextos pack test: --baseline needs a FILE")
		return exitUsage
	}
	stdins := 0
	for _, name := range []string{fs.Arg(0), *baseline, redactors.path} {
		if name == "-" {
			stdins++
		}
	}
	if stdins > 1 {
		fmt.Fprintln(stderr, "contextos pack test: only one input can be read from - (stdin)")
		return exitUsage
	}
	if len(pubs) == 0 && !*allowUnsigned {
		fmt.Fprintln(stderr, "contextos pack test: --pub PUBFILE (for signed packs) or --allow-unsigned is required")
		return exitUsage
	}
	opts := eval.TestOptions{Golden: *golden, AllowUnsigned: *allowUnsigned, Ontologies: ontologies}
	for _, t := range triggers {
		tr, err := eval.ParseTrigger(t)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack test:", err)
			return exitUsage
		}
		opts.Triggers = append(opts.Triggers, tr)
	}
	if err := redactors.load(stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack test:", err)
		return exitInvalid
	}
	opts.Validation = redactors.validation()
	if len(pubs) > 0 {
		keys, err := readKeys(pubs)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack test:", err)
			return exitUsage
		}
		opts.Keys = keys
	}
	var err error
	if opts.Pack, err = readInput(fs.Arg(0), stdin); err != nil {
		fmt.Fprintln(stderr, "contextos pack test:", err)
		return exitUsage
	}
	if baselineGiven {
		data, err := readInput(*baseline, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack test:", err)
			return exitUsage
		}
		// Given is never "no baseline": an empty file is refused by Test.
		opts.Baseline = append([]byte{}, data...)
	}
	rep, err := eval.Test(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(stderr, "contextos pack test:", err)
		var ce *eval.CaseError
		if errors.As(err, &ce) {
			return exitInvalid
		}
		return exitUsage
	}
	if *asJSON {
		out, err := rep.JSON()
		if err != nil {
			fmt.Fprintln(stderr, "contextos pack test:", err)
			return exitUsage
		}
		stdout.Write(out)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	} else {
		fmt.Fprint(stdout, rep.Text())
	}
	if !rep.Passed() {
		return exitInvalid
	}
	return exitOK
}

func triggerNames() string {
	s := ""
	for i, t := range eval.Triggers() {
		if i > 0 {
			s += ", "
		}
		s += string(t)
	}
	return s
}
