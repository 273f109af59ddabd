package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/sensitive"
)

// Call envelope metadata members (seed 000, ToolCallEnvelope.metadata).
// The gateway sets them on every call envelope of a registered adapter:
// the capability's argument schema ref, the adapter's protocol and its
// contract version, and the approval gate the call's permission requires.
const (
	MetaArgSchemaRef         = "arg_schema_ref"
	MetaProtocol             = "protocol"
	MetaVersion              = "version"
	metaRequiresApprovalGate = "requires_approval_gate"
)

// anyObject is the argument schema of a capability that declares none.
var anyObject = json.RawMessage(`{"type":"object"}`)

// maxArgSchemaRef bounds an arg_schema_ref, in bytes; maxProtocolName
// bounds a protocol name and a contract version.
const (
	maxArgSchemaRef = 256
	maxProtocolName = 64
)

// argSchemaRef is the capability's arg_schema_ref: the one it declares
// (which must be a safe ref, see safeRef: a host's declaration that is not
// is an ErrConfig naming the rule, never the value), else its schema's
// "$id" when that is a safe ref, else the digest of its schema's canonical
// JSON. A schema can come from outside (an MCP server's tool list): an
// "$id" that is long, carries credentials or holds anything of the
// sensitive catalogue is not recorded, the digest is. It depends on the
// schema alone, so a replay gets the same ref.
func argSchemaRef(c *Capability) (string, error) {
	if c.ArgSchemaRef != "" {
		if why := safeRef(c.ArgSchemaRef); why != "" {
			return "", fmt.Errorf("arg_schema_ref %s", why)
		}
		return c.ArgSchemaRef, nil
	}
	raw := c.ArgsSchema
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = anyObject
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("args schema: %w", err)
	}
	if m, ok := doc.(map[string]any); ok {
		if id, ok := m["$id"].(string); ok && id != "" && safeRef(id) == "" {
			return id, nil
		}
	}
	return canon.Digest(doc)
}

// safeRef says why ref may not be recorded as an arg_schema_ref ("" when
// it may): it is at most maxArgSchemaRef bytes of URI characters (RFC
// 3986, no spaces or controls), a URI reference with no user info, no
// query and no "@", and nothing of the sensitive catalogue, as written or
// percent-decoded.
func safeRef(ref string) string {
	if len(ref) > maxArgSchemaRef {
		return fmt.Sprintf("is longer than %d bytes", maxArgSchemaRef)
	}
	for i := 0; i < len(ref); i++ {
		if !uriChar(ref[i]) {
			return "holds a character a URI does not"
		}
	}
	u, err := url.Parse(ref)
	switch {
	case err != nil:
		return "is not a URI reference"
	case u.User != nil || strings.Contains(ref, "@"):
		return "carries user info"
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(ref, "?"):
		// A "?" after the fragment mark is no query to url.Parse, but a
		// reader takes "#?token=…" for one: no "?" anywhere.
		return "carries a query"
	}
	if _, found := sensitive.Detect(ref, sensitive.All); found {
		return "holds sensitive data"
	}
	// Percent-encoded data is judged decoded too (%40 is an '@').
	if strings.IndexByte(ref, '%') >= 0 {
		dec, err := url.PathUnescape(ref)
		if err != nil {
			return "is not a URI reference"
		}
		if strings.Contains(dec, "@") {
			return "carries user info"
		}
		if _, found := sensitive.Detect(dec, sensitive.All); found {
			return "holds sensitive data"
		}
	}
	return ""
}

// uriChar: RFC 3986 unreserved, reserved and '%'.
func uriChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// checkProtocolName checks a protocol name or contract version (what):
// 1 to maxProtocolName bytes of letters, digits and ". _ + -" (a version
// may be empty).
func checkProtocolName(what, v string, mayBeEmpty bool) error {
	if v == "" && mayBeEmpty {
		return nil
	}
	if v == "" || len(v) > maxProtocolName {
		return fmt.Errorf("%s must be 1 to %d bytes", what, maxProtocolName)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._+-", c) >= 0) {
			return fmt.Errorf("%s may hold only letters, digits and . _ + -", what)
		}
	}
	return nil
}

// callMetadata is the metadata every call envelope of s carries in a run,
// and its canonical JSON (nil when there is none). Envelopes share it: it
// is read only (each envelope takes its own copy of the map). It depends
// only on the gate the permission requires and on the registration, which
// never change once registered, so the gateway builds it once for each
// (up to maxCallMetas) and every run binding the capability shares it.
func (g *Gateway) callMetadata(s *surfaced) (map[string]any, []byte, error) {
	key := callMetaKey{gate: s.perm.RequiresApprovalGate, reg: s.reg, spec: s.spec}
	if v, ok := g.callMetas.Load(key); ok {
		c := v.(*callMeta)
		return c.m, c.b, nil
	}
	m, b, err := g.buildCallMetadata(s)
	if err == nil && g.callMetaCount.Load() < maxCallMetas {
		if _, loaded := g.callMetas.LoadOrStore(key, &callMeta{m: m, b: b}); !loaded {
			g.callMetaCount.Add(1)
		}
	}
	return m, b, err
}

// callMetaKey is what a capability's call metadata depends on.
type callMetaKey struct {
	gate string
	reg  *registered
	spec *capSpec
}

// callMeta is a call metadata and its canonical JSON (callMetadata).
type callMeta struct {
	m map[string]any
	b []byte
}

// maxCallMetas bounds the call metadata a gateway keeps: the gates
// come from the packs its runs bind, which a long-lived gateway may see
// many of. Past it, metadata is built for each run, as it is the first
// time.
const maxCallMetas = 4096

// buildCallMetadata builds callMetadata.
func (g *Gateway) buildCallMetadata(s *surfaced) (map[string]any, []byte, error) {
	m := map[string]any{}
	if s.perm.RequiresApprovalGate != "" {
		m[metaRequiresApprovalGate] = s.perm.RequiresApprovalGate
	}
	if s.reg != nil && !g.opts.OmitContractMetadata {
		m[MetaProtocol] = s.reg.protocol
		if s.reg.version != "" {
			m[MetaVersion] = s.reg.version
		}
		if s.spec != nil {
			m[MetaArgSchemaRef] = s.spec.argRef
		}
	}
	if len(m) == 0 {
		return nil, nil, nil
	}
	b, err := canon.JSON(m)
	if err != nil {
		return nil, nil, err
	}
	return m, b, nil
}
