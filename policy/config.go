package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The pvguard-owned annotation keys the config may rename (the well-known ones are package
// storage's).
const (
	// DefaultGrantAnnotation on a PV lists the namespaces (comma separated, globs allowed) whose
	// claims may name the volume in spec.volumeName (PVG010).
	DefaultGrantAnnotation = "pvguard.io/allowed-namespaces"
	// DefaultReclaimConfirmAnnotation on a PV confirms a reclaim policy change away from Retain
	// (PVG011); its value must be the new policy.
	DefaultReclaimConfirmAnnotation = "pvguard.io/confirm-reclaim-policy"
)

// Config is the enforcement configuration, read from the YAML file given to --config.
type Config struct {
	// Rules overrides the action and exemptions of single rules, keyed by ID ("PVG010") or name
	// ("volume-grab").
	Rules map[string]RuleConfig `json:"rules,omitempty"`
	// Exemptions apply to every rule.
	Exemptions Exemptions `json:"exemptions,omitempty"`
	// Controllers are the identities, in addition to the built-in Kubernetes controllers, that
	// may write binder annotations and remove protection finalizers (PVG012, PVG013): pvguard's
	// own service account, external provisioners.
	Controllers Identities `json:"controllers,omitempty"`
	// GrantAnnotation and ReclaimConfirmAnnotation rename the pvguard-owned annotations.
	GrantAnnotation          string `json:"grantAnnotation,omitempty"`
	ReclaimConfirmAnnotation string `json:"reclaimConfirmAnnotation,omitempty"`
	// Mutation switches the optional mutations of the mutating webhook.
	Mutation Mutation `json:"mutation,omitempty"`
	// ReleasedMaxAge is how long a Released Retain volume may wait before PVG023 reports it
	// (default 7 days), e.g. "72h".
	ReleasedMaxAge metav1.Duration `json:"releasedMaxAge,omitempty"`
}

// RuleConfig overrides one rule.
type RuleConfig struct {
	Action     Action     `json:"action,omitempty"`
	Exemptions Exemptions `json:"exemptions,omitempty"`
}

// Identities names users, groups and service accounts ("namespace/name").
type Identities struct {
	Users           []string `json:"users,omitempty"`
	Groups          []string `json:"groups,omitempty"`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
}

// Exemptions name who and where a rule does not apply. Namespaces may be globs ("team-*"); for a
// PersistentVolume the namespace is that of the claim it refers to.
type Exemptions struct {
	Namespaces []string `json:"namespaces,omitempty"`
	Identities `json:",inline"`
}

// Mutation holds the optional mutations.
type Mutation struct {
	// AlignPreboundClaimClass sets the storageClassName of a new claim that names a volume in
	// spec.volumeName to that volume's class when the claim got the cluster's default class
	// instead (the classic "pre-bound claim never binds" trap).
	AlignPreboundClaimClass bool `json:"alignPreboundClaimClass,omitempty"`
}

// builtinControllers are the upstream identities whose binding, protection and scheduling
// writes every rule must let through.
var builtinControllers = Identities{
	Users: []string{
		"system:kube-controller-manager",
		"system:kube-scheduler",
	},
	ServiceAccounts: []string{
		"kube-system/persistent-volume-binder",
		"kube-system/pvc-protection-controller",
		"kube-system/pv-protection-controller",
		"kube-system/expand-controller",
	},
}

// DefaultConfig is the configuration used without --config: every rule at its default action.
func DefaultConfig() *Config {
	return &Config{}
}

// grantAnnotation and reclaimConfirmAnnotation read the configurable annotation names, falling
// back to the defaults for a Config built by hand.
func (c *Config) grantAnnotation() string {
	if c.GrantAnnotation == "" {
		return DefaultGrantAnnotation
	}
	return c.GrantAnnotation
}

func (c *Config) reclaimConfirmAnnotation() string {
	if c.ReclaimConfirmAnnotation == "" {
		return DefaultReclaimConfirmAnnotation
	}
	return c.ReclaimConfirmAnnotation
}

// ParseConfig reads and validates a YAML or JSON configuration. Unknown fields, unknown rules and
// unknown actions are errors that name the offending field.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("parsing policy config: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []string
	keys := make([]string, 0, len(c.Rules))
	for key := range c.Rules {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	byRule := map[RuleID]string{}
	for _, key := range keys {
		rc := c.Rules[key]
		rl, ok := LookupRule(key)
		if !ok {
			errs = append(errs, fmt.Sprintf("rules.%s: unknown rule (use an ID such as PVG001 or a name such as volume-mode-match)", key))
		} else if other, dup := byRule[rl.ID]; dup {
			errs = append(errs, fmt.Sprintf("rules.%s: names the same rule as rules.%s", key, other))
		} else {
			byRule[rl.ID] = key
		}
		if rc.Action != "" && !rc.Action.valid() {
			errs = append(errs, fmt.Sprintf("rules.%s.action: %q is not one of deny, warn, audit, off", key, rc.Action))
		}
		errs = append(errs, rc.Exemptions.validate("rules."+key+".exemptions")...)
	}
	errs = append(errs, c.Exemptions.validate("exemptions")...)
	errs = append(errs, c.Controllers.validate("controllers")...)
	if len(errs) > 0 {
		return fmt.Errorf("invalid policy config: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (e Exemptions) validate(at string) []string {
	var errs []string
	for i, ns := range e.Namespaces {
		if _, err := path.Match(ns, ""); err != nil || strings.Contains(ns, "\n") {
			errs = append(errs, fmt.Sprintf("%s.namespaces[%d]: bad pattern %q", at, i, ns))
		}
	}
	return append(errs, e.Identities.validate(at)...)
}

func (ids Identities) validate(at string) []string {
	var errs []string
	// The admission policies' parameter object holds each list one item per line.
	for _, l := range []struct {
		field string
		items []string
	}{{"users", ids.Users}, {"groups", ids.Groups}, {"serviceAccounts", ids.ServiceAccounts}} {
		for i, x := range l.items {
			if strings.Contains(x, "\n") {
				errs = append(errs, fmt.Sprintf("%s.%s[%d]: %q contains a line break", at, l.field, i, x))
			}
		}
	}
	for i, sa := range ids.ServiceAccounts {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Sprintf("%s.serviceAccounts[%d]: %q is not namespace/name", at, i, sa))
		}
	}
	return errs
}

// ruleConfig finds the override for a rule, by ID or by name.
func (c *Config) ruleConfig(rl *Rule) (RuleConfig, bool) {
	if rc, ok := c.Rules[string(rl.ID)]; ok {
		return rc, true
	}
	rc, ok := c.Rules[rl.Name]
	return rc, ok
}

// ActionFor is the action configured for a rule.
func (c *Config) ActionFor(rl *Rule) Action {
	if rc, ok := c.ruleConfig(rl); ok && rc.Action != "" {
		return rc.Action
	}
	return rl.Default
}

// Exempt reports whether a rule does not apply to a requester, or to an object in the given
// namespaces (all of them must be exempt; none given means a cluster-scoped object with no
// namespace to match).
func (c *Config) Exempt(rl *Rule, namespaces []string, u UserInfo) bool {
	if c.Exemptions.match(namespaces, u) {
		return true
	}
	rc, ok := c.ruleConfig(rl)
	return ok && rc.Exemptions.match(namespaces, u)
}

// IsController reports whether the requester is a binding controller: a built-in Kubernetes
// controller or one named in the config.
func (c *Config) IsController(u UserInfo) bool {
	return builtinControllers.match(u) || c.Controllers.match(u)
}

func (e Exemptions) match(namespaces []string, u UserInfo) bool {
	if len(namespaces) > 0 && len(e.Namespaces) > 0 {
		all := true
		for _, ns := range namespaces {
			all = all && matchAny(e.Namespaces, ns)
		}
		if all {
			return true
		}
	}
	return e.Identities.match(u)
}

// matchAny reports whether s matches one of the glob patterns (validated at parse time).
func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

func (ids Identities) match(u UserInfo) bool {
	if u.Username == "" && len(u.Groups) == 0 {
		return false
	}
	if slices.Contains(ids.Users, u.Username) {
		return true
	}
	for _, g := range u.Groups {
		if slices.Contains(ids.Groups, g) {
			return true
		}
	}
	if ns, name, ok := serviceAccount(u.Username); ok {
		// ns+"/"+name, compared without building it: every rule asks of every review.
		return slices.ContainsFunc(ids.ServiceAccounts, func(s string) bool {
			rest, ok := strings.CutPrefix(s, ns)
			return ok && len(rest) == 1+len(name) && rest[0] == '/' && rest[1:] == name
		})
	}
	return false
}

// serviceAccount splits "system:serviceaccount:<ns>:<name>".
func serviceAccount(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}
