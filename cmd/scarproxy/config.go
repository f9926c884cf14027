package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/recall"
	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration: Default, then the YAML file, then
// SCARPROXY_* environment variables, then flags, then Validate.
type Config struct {
	Listen          string             `yaml:"listen"`
	DataDir         string             `yaml:"data_dir"`
	Mock            bool               `yaml:"mock"`
	MaxBodyBytes    int64              `yaml:"max_body_bytes"`
	ShutdownTimeout time.Duration      `yaml:"shutdown_timeout"`
	Server          ServerConfig       `yaml:"server"`
	Log             LogConfig          `yaml:"log"`
	Tenant          TenantConfig       `yaml:"tenant"`
	Providers       []providers.Config `yaml:"providers"`
	Store           StoreConfig        `yaml:"store"`
	Retention       RetentionConfig    `yaml:"retention"`
	Guard           guard.Config       `yaml:"guard"`
	Recall          recall.Config      `yaml:"recall"`
	Gateway         GatewayConfig      `yaml:"gateway"`
	Admin           AdminConfig        `yaml:"admin"`
	Tracing         TracingConfig      `yaml:"tracing"`
}

// ServerConfig is the `server:` section: how long a client may take to
// send a request, and how many body bytes the server holds at once.
type ServerConfig struct {
	// ReadHeaderTimeout bounds the time to read a request's headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadBodyTimeout bounds the time to read a request's body, from the
	// end of its headers; ReadBodyIdleTimeout the silence between two
	// reads of it. Neither counts the time of the answer.
	ReadBodyTimeout     time.Duration `yaml:"read_body_timeout"`
	ReadBodyIdleTimeout time.Duration `yaml:"read_body_idle_timeout"`
	// MaxBodyBytesInFlight bounds the bytes of request bodies held at
	// once, across requests (over it: 503 with Retry-After).
	MaxBodyBytesInFlight int64 `yaml:"max_body_bytes_in_flight"`
}

// LogConfig is the `log:` section.
type LogConfig struct {
	Format string `yaml:"format"` // text | json
	Level  string `yaml:"level"`  // debug | info | warn | error
}

// TenantConfig is the `tenant:` section.
type TenantConfig struct {
	DefaultWorkspace string `yaml:"default_workspace"`
	DefaultProject   string `yaml:"default_project"`
}

// StoreConfig is the `store:` section.
type StoreConfig struct {
	Driver string `yaml:"driver"` // bolt | postgres
	DSN    string `yaml:"dsn"`
	// RequestTimeout bounds every store call on a request's path: those
	// made before a request is forwarded (the guard read while the body
	// arrives, then the calls made after it; past it the request goes out
	// unchanged, fail open), the recording of a provider's failure before
	// its answer is delivered (past it the answer goes out with
	// X-Scar-Degraded: store), a memory API call (503) and /readyz (503).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// ReplicaDelay (PostgreSQL) is the longest a change committed through
	// another replica may take to reach this replica's guard: a request's
	// guard is checked against a read of the tenant's incident version
	// begun at most this long before the request, so under load requests
	// do not wait for the database (postgres.Options.VersionMaxAge).
	// 0: every request waits for a read begun after it arrived.
	ReplicaDelay time.Duration `yaml:"replica_delay"`
	// Durability says when a provider's failure is committed compared
	// with its answer: async (answered once queued while the store
	// commits; a crash loses at most memory.AsyncLossBound of the
	// failures clients saw) or sync (answered after the commit, within
	// RequestTimeout). See memory.Durability.
	Durability string `yaml:"durability"`
}

// RetentionConfig is the `retention:` section.
type RetentionConfig struct {
	// MaxAge and MaxPerTenant (0: no cap) prune incidents.
	MaxAge       time.Duration `yaml:"max_age"`
	MaxPerTenant int           `yaml:"max_per_tenant"`
	// SolutionsMaxAge and SolutionsMaxPerWorkspace (0: no cap) prune
	// solutions; see proxy.Options.
	SolutionsMaxAge          time.Duration `yaml:"solutions_max_age"`
	SolutionsMaxPerWorkspace int           `yaml:"solutions_max_per_workspace"`
	// FixesMaxAge and FixesMaxPerProject (0: no cap) prune learned fixes;
	// see proxy.Options.
	FixesMaxAge        time.Duration `yaml:"fixes_max_age"`
	FixesMaxPerProject int           `yaml:"fixes_max_per_project"`
	Every              time.Duration `yaml:"every"`
}

// GatewayConfig is the `gateway:` section.
type GatewayConfig struct {
	Keys []GatewayKeyConfig `yaml:"keys"`
}

// GatewayKeyConfig maps one team key to a workspace.
type GatewayKeyConfig struct {
	KeySHA256 string   `yaml:"key_sha256"`
	KeyEnv    string   `yaml:"key_env"` // alternative: the key itself, read from this env var
	Workspace string   `yaml:"workspace"`
	Projects  []string `yaml:"projects"`
}

// AdminConfig is the `admin:` section.
type AdminConfig struct {
	TokenEnv string `yaml:"token_env"`
	// Open says that a memory API without admin token nor gateway keys is
	// meant on a listen address other than loopback (see closesOpenMemory).
	Open bool `yaml:"open"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		DataDir:         "./data",
		MaxBodyBytes:    body.DefaultMaxBytes,
		ShutdownTimeout: 30 * time.Second,
		Log:             LogConfig{Format: "text", Level: "info"},
		Tenant:          TenantConfig{DefaultWorkspace: "default", DefaultProject: "default"},
		Store: StoreConfig{Driver: "bolt", RequestTimeout: 2 * time.Second, ReplicaDelay: 5 * time.Millisecond,
			Durability: string(memory.DurabilityAsync)},
		Retention: RetentionConfig{
			MaxAge:                   memory.DefaultRetentionMaxAge,
			MaxPerTenant:             100_000,
			SolutionsMaxAge:          memory.DefaultRetentionSolutionsMaxAge,
			SolutionsMaxPerWorkspace: memory.DefaultRetentionSolutionsMaxPerWorkspace,
			FixesMaxAge:              memory.DefaultRetentionFixesMaxAge,
			FixesMaxPerProject:       memory.DefaultRetentionFixesMaxPerProject,
			Every:                    memory.DefaultRetentionEvery,
		},
		Guard:  guard.DefaultConfig(),
		Recall: recall.DefaultConfig(),
		Server: ServerConfig{
			ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: 5 * time.Minute, ReadBodyIdleTimeout: 30 * time.Second,
			MaxBodyBytesInFlight: body.DefaultMaxBytesInFlight,
		},
	}
}

// loadFile applies the YAML file at path over c. Unknown keys are errors.
func (c *Config) loadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %s", path, nameKeys(b, err))
	}
	return nil
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// nameKeys rewrites yaml's "line N: ..." errors to also name the key at
// that line (e.g. "guard.window"), so a bad value is easy to find.
func nameKeys(src []byte, err error) string {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil {
		return err.Error()
	}
	return yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(yamlLine.FindStringSubmatch(m)[1])
		if key := keyAtLine(&root, n, ""); key != "" {
			return m + key + ": "
		}
		return m
	})
}

// keyAtLine returns the dotted path of the mapping key on line, or "".
func keyAtLine(n *yaml.Node, line int, prefix string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, line, prefix); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			if prefix != "" {
				name = prefix + "." + name
			}
			if n.Content[i].Line == line {
				return name
			}
			if k := keyAtLine(n.Content[i+1], line, name); k != "" {
				return k
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if k := keyAtLine(c, line, fmt.Sprintf("%s[%d]", prefix, i)); k != "" {
				return k
			}
		}
	}
	return ""
}

// applyEnv applies SCARPROXY_* variables over c.
func (c *Config) applyEnv(getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	str("SCARPROXY_LISTEN", &c.Listen)
	str("SCARPROXY_DATA", &c.DataDir)
	str("SCARPROXY_DATA_DIR", &c.DataDir)
	str("SCARPROXY_LOG_FORMAT", &c.Log.Format)
	str("SCARPROXY_LOG_LEVEL", &c.Log.Level)
	str("SCARPROXY_STORE_DRIVER", &c.Store.Driver)
	str("SCARPROXY_STORE_DSN", &c.Store.DSN)
	str("SCARPROXY_STORE_DURABILITY", &c.Store.Durability)
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"SCARPROXY_MOCK", &c.Mock}, {"SCARPROXY_ADMIN_OPEN", &c.Admin.Open}} {
		if v := getenv(b.name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean", b.name, v)
			}
			*b.dst = on
		}
	}
	for _, n := range []struct {
		name string
		dst  *int64
	}{{"SCARPROXY_MAX_BODY_BYTES", &c.MaxBodyBytes}, {"SCARPROXY_SERVER_MAX_BODY_BYTES_IN_FLIGHT", &c.Server.MaxBodyBytesInFlight}} {
		if v := getenv(n.name); v != "" {
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a number", n.name, v)
			}
			*n.dst = i
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"SCARPROXY_SERVER_READ_HEADER_TIMEOUT", &c.Server.ReadHeaderTimeout},
		{"SCARPROXY_SERVER_READ_BODY_TIMEOUT", &c.Server.ReadBodyTimeout},
		{"SCARPROXY_SERVER_READ_BODY_IDLE_TIMEOUT", &c.Server.ReadBodyIdleTimeout},
	} {
		if v := getenv(d.name); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a duration (e.g. 30s, 5m)", d.name, v)
			}
			*d.dst = t
		}
	}
	return nil
}

// Validate checks every key and names the first bad one.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port", c.Listen)
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("max_body_bytes: must be positive")
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("shutdown_timeout: must not be negative")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"server.read_header_timeout", c.Server.ReadHeaderTimeout},
		{"server.read_body_timeout", c.Server.ReadBodyTimeout},
		{"server.read_body_idle_timeout", c.Server.ReadBodyIdleTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: must be positive", d.key)
		}
	}
	if c.Server.MaxBodyBytesInFlight < c.MaxBodyBytes {
		return fmt.Errorf("server.max_body_bytes_in_flight: must be at least max_body_bytes (%d), or no body of that size could be read", c.MaxBodyBytes)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("log.format: %q is not text or json", c.Log.Format)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		return err
	}
	switch c.Store.Driver {
	case "bolt":
		if c.DataDir == "" {
			return fmt.Errorf("data_dir: required with store.driver bolt")
		}
	case "postgres":
		if c.Store.DSN == "" {
			return fmt.Errorf("store.dsn: required with store.driver postgres (or set SCARPROXY_STORE_DSN)")
		}
	default:
		return fmt.Errorf("store.driver: %q is not bolt or postgres", c.Store.Driver)
	}
	if err := tenant.ValidName(c.Tenant.DefaultWorkspace); err != nil {
		return fmt.Errorf("tenant.default_workspace: %v", err)
	}
	if err := tenant.ValidName(c.Tenant.DefaultProject); err != nil {
		return fmt.Errorf("tenant.default_project: %v", err)
	}
	if c.Store.RequestTimeout <= 0 {
		return fmt.Errorf("store.request_timeout: must be positive")
	}
	if c.Store.ReplicaDelay < 0 {
		return fmt.Errorf("store.replica_delay: must not be negative")
	}
	switch memory.Durability(c.Store.Durability) {
	case memory.DurabilityAsync, memory.DurabilitySync:
	default:
		return fmt.Errorf("store.durability: %q is not async or sync", c.Store.Durability)
	}
	if c.Retention.MaxAge <= 0 {
		return fmt.Errorf("retention.max_age: must be positive")
	}
	if c.Retention.MaxPerTenant < 0 {
		return fmt.Errorf("retention.max_per_tenant: must not be negative")
	}
	if c.Retention.SolutionsMaxAge <= 0 {
		return fmt.Errorf("retention.solutions_max_age: must be positive")
	}
	if c.Retention.SolutionsMaxPerWorkspace < 0 {
		return fmt.Errorf("retention.solutions_max_per_workspace: must not be negative")
	}
	if c.Retention.FixesMaxAge <= 0 {
		return fmt.Errorf("retention.fixes_max_age: must be positive")
	}
	if c.Retention.FixesMaxPerProject < 0 {
		return fmt.Errorf("retention.fixes_max_per_project: must not be negative")
	}
	if c.Retention.Every <= 0 {
		return fmt.Errorf("retention.every: must be positive")
	}
	if !c.Mock && len(c.Providers) == 0 {
		return fmt.Errorf("providers: at least one provider is required (or use --mock)")
	}
	for i, p := range c.Providers {
		if err := p.Validate(fmt.Sprintf("providers[%d]", i)); err != nil {
			return err
		}
	}
	if err := c.Guard.Validate(); err != nil {
		return err
	}
	if err := c.Recall.Validate(); err != nil {
		return err
	}
	if c.Tracing.OTLPEndpoint != "" {
		if _, err := c.Tracing.tracesURL(); err != nil {
			return err
		}
	}
	for i, k := range c.Gateway.Keys {
		if (k.KeySHA256 == "") == (k.KeyEnv == "") {
			return fmt.Errorf("gateway.keys[%d]: set exactly one of key_sha256 and key_env", i)
		}
		if k.Workspace == "" {
			return fmt.Errorf("gateway.keys[%d].workspace: required", i)
		}
	}
	return nil
}

// closesOpenMemory reports whether serve closes an open memory (the
// memory API, MCP and the dashboard without an admin token nor gateway
// keys: proxy.Options.CloseOpenMemory): on a listen address other than
// loopback, unless admin.open says an open memory is meant, since anyone
// who can reach the port could read and delete every tenant's memory.
func (c *Config) closesOpenMemory() bool {
	return !c.Admin.Open && !loopbackListen(c.Listen)
}

// openMemory reports whether the memory API, MCP and the dashboard
// require no credential: neither an admin token nor gateway keys.
func (c *Config) openMemory() bool {
	return c.Admin.TokenEnv == "" && len(c.Gateway.Keys) == 0
}

// loopbackListen reports whether a listen address only accepts local
// connections: a host of localhost or a loopback IP (127.0.0.0/8, ::1).
// An empty host (all interfaces) and any other name are not.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// providerConfigs returns the providers to build: with mock on, a mock
// provider named "mock" replaces the configured ones.
func (c *Config) providerConfigs() []providers.Config {
	if c.Mock {
		return []providers.Config{{Name: "mock", Type: providers.TypeMock}}
	}
	return c.Providers
}

func parseLevel(s string) (level int, err error) {
	switch strings.ToLower(s) {
	case "debug":
		return -4, nil
	case "info", "":
		return 0, nil
	case "warn":
		return 4, nil
	case "error":
		return 8, nil
	}
	return 0, fmt.Errorf("log.level: %q is not debug, info, warn or error", s)
}
