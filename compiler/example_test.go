package compiler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Compile the canonical support scenario: the pack, the request, the run
// context, and the host's evidence and memory.
func ExampleCompile() {
	readJSON := func(b []byte, v any) {
		if err := json.Unmarshal(b, v); err != nil {
			log.Fatal(err)
		}
	}
	data := fixture.SupportPack()
	p, err := pack.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	var req runcontext.InvokeRequest
	var rc runcontext.RunContext
	var evidence compiler.StaticEvidence
	var memory compiler.StaticMemory
	readJSON(fixture.Invoke(), &req)
	readJSON(fixture.RunContext(), &rc)
	readJSON(fixture.Evidence(), &evidence)
	readJSON(fixture.Memory(), &memory)

	cc, err := compiler.Compile(context.Background(),
		[]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}, &req, &rc,
		&compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Evidence: evidence, Memory: memory})
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for _, b := range cc.CompiledPrompt.ContextBlocks {
		ids = append(ids, b.BlockID)
	}
	fmt.Println("blocks:", ids)
	fmt.Println("tools:", cc.ContextLedger.Tools)
	fmt.Println("gates:", cc.RuntimeControls.ApprovalGatesActive)
	for _, o := range cc.ContextLedger.Omissions {
		fmt.Println("omitted:", o.Ref, "-", o.Reason)
	}
	// Output:
	// blocks: [biz_summary pol_0 pol_1 tool_0 tool_1 tool_2 ev_0 ev_1 ev_2 ev_3 ev_4 mem_0 session]
	// tools: [adp_orders.lookup adp_policy.eval adp_payments.issue_refund]
	// gates: [GATE_FINANCE_APPROVAL]
	// omitted: chat:msg_991 - untrusted: only trusted evidence is admitted
	// omitted: mem:cus_77:guess_vip - not promoted (candidate): candidates and captures are not trusted context
}

// Prepare checks each pack's compatibility.requires against the host: by
// default this module's runtime contract version and the declared
// ontologies; Options.Host declares others.
func ExamplePrepare_compatibility() {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		log.Fatal(err)
	}
	p.ContractMeta.Compatibility.Requires["runtime"] = ">=2.0.0"
	in := []compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}}
	_, err = compiler.Prepare(in, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}})
	fmt.Println(errors.Is(err, compiler.ErrIncompatible), err)
	_, err = compiler.Prepare(in, &compiler.Options{Ontologies: []string{"ont.support@1.0.0"}, Host: pack.Host{"runtime": "2.0.0", "ontology": "1.0.0"}})
	fmt.Println(err)
	// Output:
	// true pack: incompatible with host (stage 2): pack ctxpack.support@1.0.0: pack: incompatible with host: pack requires runtime >=2.0.0, host has 1.0.0
	// <nil>
}

// A run's safety mode withholds the capabilities whose approval mode is
// above it: AboveSafetyMode names them (the runtime says so in a notice).
func ExamplePrepared_AboveSafetyMode() {
	p, err := pack.Decode(fixture.SupportPack())
	if err != nil {
		log.Fatal(err)
	}
	prepared, err := compiler.Prepare([]compiler.Input{{Ref: pack.MustParseRef("ctxpack.support@1.0.0"), Pack: p}},
		&compiler.Options{Ontologies: []string{"ont.support@1.0.0"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, mode := range []runcontext.ApprovalMode{runcontext.ReadOnly, runcontext.Destructive} {
		fmt.Println(mode, prepared.AboveSafetyMode(mode))
	}
	// Output:
	// read_only [{adp_payments.issue_refund destructive}]
	// destructive []
}
