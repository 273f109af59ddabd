package sqlite

import (
	"errors"

	"github.com/contextos/contextos/internal/sqlstore"
)

// Sentinel errors.
var (
	// ErrConfig reports an unusable Open argument.
	ErrConfig = errors.New("invalid store configuration")
	// ErrSchemaVersion reports a database a newer release migrated.
	ErrSchemaVersion = sqlstore.ErrSchemaVersion
	// ErrClaimLost reports a Complete by a holder whose idempotency claim
	// lapsed and was taken over; the new holder's result is the key's.
	ErrClaimLost = sqlstore.ErrClaimLost
)
