package ipfix

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/linerate/linerate/config"
)

// Config is the config file's [ipfix] table.
type Config struct {
	// Collectors are "udp:host:port" or "tcp:host:port" (4739 is IPFIX's
	// port); each gets every record.
	Collectors []string `toml:"collectors"`
	// ObservationDomain is the message header's observation domain ID:
	// the appliance's number in the fleet.
	ObservationDomain uint32 `toml:"observation_domain"`
	// TemplateRefresh is how often a UDP session sends its templates again
	// (default 60s).
	TemplateRefresh config.Duration `toml:"template_refresh"`
	// Enterprise is the private enterprise number of the elements IANA has
	// none for (default DocumentationPEN).
	Enterprise uint32 `toml:"enterprise"`
	// MaxMessage is the largest UDP message in bytes (default 1400, to fit
	// an Ethernet MTU with IPv6 and UDP headers).
	MaxMessage int `toml:"max_message"`
}

// DocumentationPEN is the private enterprise number linerate's own
// elements carry by default: 32473, the number RFC 5612 sets aside for
// documentation. An operator with a number of their own sets enterprise.
const DocumentationPEN = 32473

// Defaults.
const (
	defaultRefresh    = 60 * time.Second
	defaultMaxMessage = 1400
)

func (c *Config) defaults() {
	if c.TemplateRefresh == 0 {
		c.TemplateRefresh = config.Duration(defaultRefresh)
	}
	if c.Enterprise == 0 {
		c.Enterprise = DocumentationPEN
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = defaultMaxMessage
	}
}

// SectionName is the config file's table.
const SectionName = "ipfix"

func init() {
	config.RegisterSection(config.Section{Name: SectionName, Check: func(_ *config.File, t config.Table) error {
		_, err := decode(t)
		return err
	}})
}

// Decoder is a section of the config file (config.Table, or a stage's
// Setup.Section).
type Decoder interface{ Decode(v any) error }

// decode reads and checks the [ipfix] table of t; ok is false when the file
// has none.
func decode(t Decoder) (c *Config, err error) {
	var s struct {
		IPFIX *Config `toml:"ipfix"`
	}
	if err := t.Decode(&s); err != nil {
		return nil, err
	}
	if s.IPFIX == nil {
		return nil, nil
	}
	c = s.IPFIX
	fail := func(key string, err error) error {
		if tbl, ok := t.(config.Table); ok {
			return tbl.Error(SectionName+"."+key, err)
		}
		return fmt.Errorf("ipfix.%s: %w", key, err)
	}
	if len(c.Collectors) == 0 {
		return nil, fail("collectors", errors.New(`missing: name at least one, e.g. ["udp:192.0.2.10:4739"]`))
	}
	for i, col := range c.Collectors {
		if err := checkCollector(col); err != nil {
			return nil, fail("collectors["+strconv.Itoa(i)+"]", err)
		}
	}
	if c.TemplateRefresh != 0 && time.Duration(c.TemplateRefresh) < time.Second {
		return nil, fail("template_refresh", fmt.Errorf("%v is below 1s", time.Duration(c.TemplateRefresh)))
	}
	if c.MaxMessage != 0 && (c.MaxMessage < 512 || c.MaxMessage > 65535) {
		return nil, fail("max_message", fmt.Errorf("%d is not from 512 to 65535", c.MaxMessage))
	}
	c.defaults()
	return c, nil
}

func checkCollector(s string) error {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || (network != "udp" && network != "tcp") {
		return fmt.Errorf(`%q: use "udp:host:port" or "tcp:host:port"`, s)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf(`%q: use "udp:host:port" or "tcp:host:port"`, s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port %q", s, port)
	}
	return nil
}

// Shared is the engine's one exporter for the file's [ipfix] table, made
// on first use through global (a stage's Setup.Global), or nil when the
// file has none: every stage that exports sends to it.
func Shared(section Decoder, global func(key string, mk func() any) any, log *slog.Logger) (*Exporter, error) {
	c, err := decode(section)
	if err != nil || c == nil {
		return nil, err
	}
	return global("ipfix.exporter", func() any { return NewExporter(*c, log) }).(*Exporter), nil
}
