package main

import (
	"flag"

	"github.com/contextos/contextos"
)

// claimFlags is the --claim-pub flag of run and replay: the public keys of
// the identity service that signs agents' identity claims. With one, a
// claim is verified and a run whose packs allow delegated or destructive
// work needs one; without, such a run is waived and its record says so
// (agent_identity.claim_verification "waived"), as befits an offline
// driver of golden cases. A claim that is present is verified either way
// (without keys it cannot verify and the run is refused).
type claimFlags struct{ pubs multiFlag }

func (c *claimFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.pubs, "claim-pub", "identity-claim issuer's public key `FILE` (keygen format, repeatable); with it, runs that may do delegated or destructive work need a verified claim")
}

func (c *claimFlags) options() (contextos.IdentityOptions, error) {
	if len(c.pubs) == 0 {
		return contextos.IdentityOptions{AllowUnclaimed: true}, nil
	}
	keys, err := readKeys(c.pubs)
	if err != nil {
		return contextos.IdentityOptions{}, err
	}
	return contextos.IdentityOptions{Keys: keys}, nil
}
