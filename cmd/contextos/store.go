package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/store/postgres"
	"github.com/contextos/contextos/store/sqlite"
)

// storeFlag is --store: sqlite:PATH, or a postgres:// (postgresql://)
// URL. The value is never echoed: a URL may hold a password.
type storeFlag struct{ spec string }

func (s *storeFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&s.spec, "store", "", "durable store: `sqlite:PATH` or postgres://USER@HOST/DB (default: in memory, gone when the command ends)")
}

// durableStore is what the CLI uses of an open store (*sqlite.Store and
// *postgres.Store).
type durableStore interface {
	Configure(o *contextos.Options)
	Records() decision.Store
	Packets() contextos.PacketStore
	Checkpoints() contextos.ListingCheckpointStore
	Transcripts() contextos.TranscriptStore
	Idempotency() gateway.IdempotencyStore
	Close() error
}

// errStoreFlag reports a --store value that names no store.
var errStoreFlag = errors.New("--store: want sqlite:PATH, postgres://… or postgresql://…")

// open opens the store --store names, or returns nil without the flag.
// Every error is a usage error that does not hold the flag's value.
func (s *storeFlag) open(ctx context.Context) (durableStore, error) {
	if s.spec == "" {
		return nil, nil
	}
	st, err := openStore(ctx, s.spec)
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	return st, nil
}

// require opens the store a command cannot do without.
func (s *storeFlag) require(ctx context.Context, cmd string) (durableStore, error) {
	if s.spec == "" {
		return nil, exitf(exitUsage, "%s needs --store sqlite:PATH or --store postgres://… (the runs it reads are in a durable store)", cmd)
	}
	// A command that reads a store never creates one: a mistyped path
	// would otherwise "verify" an empty, new database.
	if path, ok := strings.CutPrefix(s.spec, "sqlite:"); ok && path != "" && path != ":memory:" && !strings.HasPrefix(path, "file:") {
		if _, err := os.Stat(path); err != nil {
			return nil, exitf(exitUsage, "%s: --store: the sqlite database %.120q does not exist", cmd, path)
		}
	}
	return s.open(ctx)
}

// openStore opens spec's store. Its errors never hold spec's password.
func openStore(ctx context.Context, spec string) (durableStore, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("%w (the sqlite path is empty)", errStoreFlag)
		}
		st, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			return nil, fmt.Errorf("--store: %s", scrub(err.Error(), spec))
		}
		return st, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		if _, err := url.Parse(spec); err != nil {
			return nil, fmt.Errorf("%w (the URL does not parse)", errStoreFlag)
		}
		st, err := postgres.Open(ctx, spec, nil)
		if err != nil {
			return nil, fmt.Errorf("--store: %s", scrub(err.Error(), spec))
		}
		return st, nil
	}
	return nil, errStoreFlag
}

// scrub removes spec's password (in its user info or its query) and any
// credential the catalogue of sensitive data recognizes from an error
// message.
func scrub(msg, spec string) string {
	if u, err := url.Parse(spec); err == nil {
		var pws []string
		if pw, ok := u.User.Password(); ok {
			pws = append(pws, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		pws = append(pws, u.Query()["password"]...)
		for _, pw := range pws {
			if pw != "" {
				msg = strings.ReplaceAll(msg, pw, "[REDACTED]")
			}
		}
	}
	msg, _ = sensitive.Redact(msg, sensitive.Secrets)
	return msg
}
