package transporttest_test

import (
	"testing"

	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/transporttest"
)

// mapSecrets holds secrets in a transport.MapSecrets under their most
// specific key, namespace/name:key (name:key without a namespace).
func mapSecrets(_ *testing.T, secrets map[transport.SecretRef]string) transport.SecretResolver {
	m := transport.MapSecrets{}
	for ref, v := range secrets {
		k := ref.Name + ":" + ref.Key
		if ref.Namespace != "" {
			k = ref.Namespace + "/" + k
		}
		m[k] = v
	}
	return m
}

func TestMapSecrets(t *testing.T) {
	transporttest.RunSecretResolverTests(t, mapSecrets)
}
