package policy

import (
	"fmt"
)

// Decision is the outcome of evaluating one review against the catalogue, with the findings
// sorted by the action configured for their rule. Rules set to off produce nothing.
type Decision struct {
	Deny  []Finding
	Warn  []Finding
	Audit []Finding
}

// Allowed reports whether the write may proceed.
func (d *Decision) Allowed() bool { return len(d.Deny) == 0 }

// Engine evaluates reviews against the catalogue under one Config. It is immutable and safe for
// concurrent use; a config reload builds a new Engine.
type Engine struct {
	cfg        *Config
	rules      []Rule
	auditRules []Rule
}

// NewEngine returns an engine for the config; a nil config means DefaultConfig.
func NewEngine(cfg *Config) *Engine {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	return &Engine{cfg: cfg, rules: Catalogue(), auditRules: AuditRules()}
}

// Config returns the engine's configuration.
func (e *Engine) Config() *Config { return e.cfg }

// Admit evaluates a write. An error means a related object could not be read, so the write
// could not be judged; the caller decides whether that fails open or closed.
func (e *Engine) Admit(r *Review, v View) (Decision, error) {
	var d Decision
	if r.Operation == OperationDelete {
		return d, nil
	}
	ns := r.namespaces()
	v = newMemoView(v)
	for i := range e.rules {
		rl := &e.rules[i]
		if !rl.appliesTo(r.Kind) {
			continue
		}
		action := e.cfg.ActionFor(rl)
		if action == ActionOff || e.cfg.Exempt(rl, ns, r.User) {
			continue
		}
		found, err := rl.Check(r, v, e.cfg)
		if err != nil {
			return Decision{}, fmt.Errorf("evaluating %s %s on %s: %w", rl.ID, rl.Name, r.Object(), err)
		}
		for _, f := range found {
			f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
			if f.Object.Kind == "" {
				f.Object = r.Object()
			}
			switch action {
			case ActionDeny:
				d.Deny = append(d.Deny, f)
			case ActionWarn:
				d.Warn = append(d.Warn, f)
			default:
				d.Audit = append(d.Audit, f)
			}
		}
	}
	return d, nil
}
