package gateway

import (
	"encoding/json"
	"testing"
)

// A schema $id carrying a card number percent-encoded, or in a fragment
// with look-alike separators the URI charset allows, is not recorded as the
// arg_schema_ref on no envelope: the schema digest is used instead.
func TestArgSchemaRefJudgesDecodedID(t *testing.T) {
	for _, id := range []string{
		"https://schemas.example/%34%31%31%31%31%31%31%31%31%31%31%31%31%31%31%31",
		"https://schemas.example/x#alice%40example.com",
		"urn:x:NDExMTExMTExMTExMTExMQ",
	} {
		b, _ := json.Marshal(map[string]any{"$id": id, "type": "object"})
		c := Capability{ArgsSchema: b}
		ref, err := argSchemaRef(&c)
		if err == nil && ref == id {
			t.Errorf("$id %q recorded as arg_schema_ref", id)
		}
	}
}
