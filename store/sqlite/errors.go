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
)
