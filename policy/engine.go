package policy

import (
	"errors"
	"fmt"
	"slices"
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

// Engine evaluates reviews, and audits existing objects, against a rule set under one Config. It
// is immutable and safe for concurrent use; a config reload builds a new Engine.
type Engine struct {
	cfg   *Config
	rules []Rule
	// atAdmission and inAudit are the rules of the set that admission and the audit run, in the
	// set's order, as each rule's Judges says.
	atAdmission, inAudit []Rule
}

// NewEngine returns an engine over the Catalogue for the config; a nil config means
// DefaultConfig.
func NewEngine(cfg *Config) *Engine { return NewEngineWith(cfg, Catalogue()) }

// NewEngineWith returns an engine over the given rule set, in its order, instead of the
// Catalogue: everything that takes an engine (the webhooks, the audit, the binder) then runs
// those rules. The config's per-rule settings are checked against the Catalogue when it is
// parsed; a rule outside it runs with its default action and the global exemptions.
func NewEngineWith(cfg *Config, rules []Rule) *Engine {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	e := &Engine{cfg: cfg, rules: slices.Clone(rules)}
	for _, rl := range e.rules {
		if rl.Judges.AtAdmission() {
			e.atAdmission = append(e.atAdmission, rl)
		}
		if rl.Judges.InAudit() {
			e.inAudit = append(e.inAudit, rl)
		}
	}
	return e
}

// Config returns the engine's configuration.
func (e *Engine) Config() *Config { return e.cfg }

// Reads lists the kinds the rules of the engine's set read through the View (Rule.Reads), each
// once: a reader starts informers for, and lists, those of clusterstate.Readables.
func (e *Engine) Reads() []Kind { return ReadKinds(e.rules) }

// ReadKinds lists the kinds the rules read through the View (Rule.Reads), each once, in the
// rules' order.
func ReadKinds(rules []Rule) []Kind {
	var out []Kind
	for _, rl := range rules {
		for _, k := range rl.Reads {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// rule finds a rule of the engine's set by ID.
func (e *Engine) rule(id RuleID) (*Rule, bool) {
	for i := range e.rules {
		if e.rules[i].ID == id {
			return &e.rules[i], true
		}
	}
	return nil, false
}

// Admit evaluates a write. Every rule that applies is evaluated, even when another could not
// judge: the decision holds the findings of all the rules that could, and the error joins one
// *RuleError per rule that could not (a related object could not be read). So one failing rule
// never hides another's finding, and a caller that refuses on deny findings refuses for the
// right reason. An error with no decision means the review itself cannot be judged: it lacks
// what its operation needs (see Review). Either way the caller decides whether an error fails
// open or closed.
func (e *Engine) Admit(r *Review, v View) (Decision, error) {
	var d Decision
	if r.Operation == OperationDelete {
		return d, nil
	}
	if err := r.judgeable(); err != nil {
		return Decision{}, err
	}
	m, _ := v.(*memoView)
	pooled := false
	if m == nil {
		m, pooled = takeMemo(v), true
	}
	found, failed := e.evaluate(e.atAdmission, r, m)
	if pooled {
		giveMemo(m)
	}
	for _, f := range found {
		switch f.Action {
		case ActionDeny:
			d.Deny = append(d.Deny, f)
		case ActionWarn:
			d.Warn = append(d.Warn, f)
		default:
			d.Audit = append(d.Audit, f)
		}
	}
	return d, errors.Join(failed...)
}

// evaluate is the one rule loop, for admission and the audit alike. It applies each of the
// rules that judges the review's kind, unless the config turns it off or exempts the review (by
// the namespaces the review touches and its requester; an audit's review has none), fills in each
// finding's rule, name, action and, when the rule left it out, object, and returns them in the
// rules' order. A rule that cannot judge adds a *RuleError to failed instead (out and failed are
// nil, and not allocated, until a rule finds something or fails).
func (e *Engine) evaluate(rules []Rule, r *Review, v View) (out []Finding, failed []error) {
	var nsBuf [2]string
	ns := r.namespaces(&nsBuf)
	for i := range rules {
		rl := &rules[i]
		if !rl.appliesTo(r.Kind) {
			continue
		}
		action := e.cfg.ActionFor(rl)
		if action == ActionOff || e.cfg.Exempt(rl, ns, r.User) {
			continue
		}
		found, err := rl.Check(r, v, e.cfg)
		if err != nil {
			failed = append(failed, &RuleError{Rule: rl.ID, Name: rl.Name, Object: r.Object(), Err: err})
			continue
		}
		for _, f := range found {
			f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
			if f.Object.Kind == "" {
				f.Object = r.Object()
			}
			out = append(out, f)
		}
	}
	return out, failed
}

// RuleError is one rule's failure to judge one object, usually because a related object could
// not be read. Admit and the audit return them (joined) beside the findings of the other rules;
// errors.As finds one in what they return, which tells a partial result from a review that could
// not be judged at all.
type RuleError struct {
	Rule   RuleID
	Name   string
	Object ObjectRef
	Err    error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("evaluating %s %s on %s: %v", e.Rule, e.Name, e.Object, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

// SplitRuleErrors takes apart what an audit (or Admit) returns: each rule that could not judge an
// object (a *RuleError, reported beside the other rules' findings), or, when anything else
// failed, that error alone.
func SplitRuleErrors(err error) ([]error, error) {
	if err == nil {
		return nil, nil
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = flattenJoined(joined.Unwrap())
	}
	for _, e := range errs {
		var re *RuleError
		if !errors.As(e, &re) {
			return nil, err
		}
	}
	return errs, nil
}

// flattenJoined lists the errors inside nested errors.Join results (the audit joins per object,
// and each object's joins per rule).
func flattenJoined(errs []error) []error {
	var out []error
	for _, e := range errs {
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, flattenJoined(joined.Unwrap())...)
		} else {
			out = append(out, e)
		}
	}
	return out
}

// judgeable reports why a review that is not a DELETE cannot be judged: an operation other than
// CREATE or UPDATE, an unknown kind, no new object, or an UPDATE without the old one. Judging such
// a review would mean allowing a write nobody looked at (an UPDATE without its old object would
// pass every rule that guards a change).
func (r *Review) judgeable() error {
	var cur, old bool
	switch r.Kind {
	case KindPersistentVolume:
		cur, old = r.PV != nil, r.OldPV != nil
	case KindPersistentVolumeClaim:
		cur, old = r.PVC != nil, r.OldPVC != nil
	case KindStorageClass:
		cur, old = r.SC != nil, r.OldSC != nil
	default:
		return fmt.Errorf("cannot judge a write of kind %q", r.Kind)
	}
	switch {
	case r.Operation != OperationCreate && r.Operation != OperationUpdate:
		return fmt.Errorf("cannot judge operation %q on a %s", r.Operation, r.Kind)
	case !cur:
		return fmt.Errorf("%s of a %s without the object", r.Operation, r.Kind)
	case r.Operation == OperationUpdate && !old:
		return fmt.Errorf("UPDATE of %s without the old object", r.Object())
	}
	return nil
}
