package planner

import (
	"encoding/json"
	"slices"
	"sync"
)

// Bounds of the cache of rewritten argument schemas (parameters): at most
// maxCachedSchemas schemas of at most maxCachedSchemaBytes each. A larger
// schema is rewritten every turn; a full cache is emptied and filled
// again, so a host registering schemas without end holds memory bounded
// by maxCachedSchemas × maxCachedSchemaBytes × 2.
const (
	maxCachedSchemas     = 512
	maxCachedSchemaBytes = 64 << 10
)

// schemas caches parameters' rewriting by the schema's text: a run asks
// for the same registered schemas every turn, and the rewriting (compact,
// split, sort) is the costliest part of Render. It is safe for
// concurrent use.
var schemas schemaCache

type schemaCache struct {
	mu sync.RWMutex
	m  map[string]json.RawMessage
}

// rewrite is rewritten(schema), from the cache when it has it. The result
// is the caller's own (a copy): a conversation's tools may be edited.
func (c *schemaCache) rewrite(schema []byte, rewritten func([]byte) json.RawMessage) json.RawMessage {
	if len(schema) > maxCachedSchemaBytes {
		return rewritten(schema)
	}
	c.mu.RLock()
	out, ok := c.m[string(schema)]
	c.mu.RUnlock()
	if ok {
		return slices.Clone(out)
	}
	out = rewritten(schema)
	c.mu.Lock()
	if len(c.m) >= maxCachedSchemas || c.m == nil {
		c.m = make(map[string]json.RawMessage, 64)
	}
	c.m[string(schema)] = slices.Clone(out)
	c.mu.Unlock()
	return out
}

// len is how many schemas the cache holds.
func (c *schemaCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
