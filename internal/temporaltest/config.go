package temporaltest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"text/template"
)

// The server's services; each has a gRPC and a membership port.
var services = []string{"frontend", "history", "matching", "worker"}

// config is what a server's configuration file is made from.
type config struct {
	Path           string         // the configuration file
	DynamicConfig  string         // the dynamic configuration file
	GRPCPort       map[string]int // service → gRPC port
	MembershipPort map[string]int // service → membership port
}

func (c config) frontendHostPort() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.GRPCPort["frontend"]))
}

// configTemplate is a development server's configuration: SQLite in
// memory for both stores (schema set up at start), one history shard, no
// metrics, pprof or HTTP listeners, every service on loopback.
var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{
	"list":     func(s ...string) []string { return s },
	"services": func() []string { return services },
}).Parse(`log:
  stdout: true
  level: warn

persistence:
  defaultStore: sqlite-default
  visibilityStore: sqlite-visibility
  numHistoryShards: 1
  datastores:
{{- range $name := list "sqlite-default" "sqlite-visibility"}}
    {{$name}}:
      sql:
        pluginName: sqlite
        databaseName: default
        connectAddr: localhost
        connectProtocol: tcp
        connectAttributes:
          mode: memory
          cache: private
          setup: "true"
        maxConns: 1
        maxIdleConns: 1
        maxConnLifetime: 1h
{{- end}}

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1

services:
{{- range $svc := services}}
  {{$svc}}:
    rpc:
      grpcPort: {{index $.GRPCPort $svc}}
      membershipPort: {{index $.MembershipPort $svc}}
      bindOnLocalHost: true
{{- end}}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:{{index .GRPCPort "frontend"}}

dcRedirectionPolicy:
  policy: noop

dynamicConfigClient:
  filepath: {{.DynamicConfig}}
  pollInterval: 10s
`))

// dynamicConfig refreshes the namespace cache every second (the default
// is two), so a namespace registered at start is served sooner.
const dynamicConfig = `system.namespaceCacheRefreshInterval:
  - value: 1s
`

// writeConfig picks free ports and writes the configuration files to dir.
func writeConfig(dir string) (config, error) {
	ports, err := freePorts(2 * len(services))
	if err != nil {
		return config{}, err
	}
	cfg := config{
		Path:           filepath.Join(dir, "temporal.yaml"),
		DynamicConfig:  filepath.Join(dir, "dynamicconfig.yaml"),
		GRPCPort:       map[string]int{},
		MembershipPort: map[string]int{},
	}
	for i, svc := range services {
		cfg.GRPCPort[svc] = ports[2*i]
		cfg.MembershipPort[svc] = ports[2*i+1]
	}
	var b bytes.Buffer
	if err := configTemplate.Execute(&b, cfg); err != nil {
		return config{}, fmt.Errorf("temporaltest: config: %w", err)
	}
	if err := os.WriteFile(cfg.Path, b.Bytes(), 0o600); err != nil {
		return config{}, fmt.Errorf("temporaltest: %w", err)
	}
	if err := os.WriteFile(cfg.DynamicConfig, []byte(dynamicConfig), 0o600); err != nil {
		return config{}, fmt.Errorf("temporaltest: %w", err)
	}
	return cfg, nil
}

// freePorts returns n distinct loopback TCP ports free a moment ago: all
// are held open at once, so none repeats, then released for the server.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("temporaltest: pick a port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// inUse matches the error of a listener whose port another process took
// between freePorts and the server's start.
var inUse = regexp.MustCompile(`(?i)address already in use`)

func portInUse(log string) bool { return inUse.MatchString(log) }
