package policytest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
)

// Options select and date a run.
type Options struct {
	// Run selects the cases whose name it matches (nil: all).
	Run *regexp.Regexp
	// Now dates the suites that do not set their own (zero: the time of the run).
	Now time.Time
}

// Report is the result of a run.
type Report struct {
	Suites []SuiteResult `json:"suites"`
	// Cases counts the cases run, Passed and Failed how they ended.
	Cases    int           `json:"cases"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Duration time.Duration `json:"-"`
}

// SuiteResult is one suite's cases that ran.
type SuiteResult struct {
	File  string       `json:"file"`
	Index int          `json:"document"`
	Name  string       `json:"name,omitempty"`
	Cases []CaseResult `json:"cases"`

	where string
}

// CaseResult is how one case ended.
type CaseResult struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Passed bool   `json:"passed"`
	// Failure says what differs from the expectation.
	Failure string `json:"failure,omitempty"`
	// Expected and Got are a write case's answers ("denied [PVG002]", "allowed"); Message the
	// text of what it got (the denial, the warnings).
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Run runs the selected cases of the suites, on every core, and reports them in order.
func Run(ctx context.Context, suites []*Suite, o Options) Report {
	start := time.Now()
	now := o.Now
	if now.IsZero() {
		now = start
	}
	// A job is a case, or a sequential suite's cases in order, up to the last one selected (the
	// cases before a selected one make its state, so they run, unreported).
	type job struct {
		s      *Suite
		cases  []*Case
		si     int   // the suite's result in rep
		report []int // per case, its result in the suite's, or -1
	}
	var jobs []job
	rep := Report{Suites: make([]SuiteResult, 0, len(suites))}
	for _, s := range suites {
		sr := SuiteResult{File: s.File, Index: s.Index, Name: s.Name, where: s.Where()}
		seq := job{s: s, si: len(rep.Suites)}
		for _, c := range s.Cases {
			selected := o.Run == nil || o.Run.MatchString(c.Name)
			if !s.Sequential {
				if selected {
					jobs = append(jobs, job{s: s, cases: []*Case{c}, si: len(rep.Suites), report: []int{len(sr.Cases)}})
				}
			} else {
				seq.cases = append(seq.cases, c)
				seq.report = append(seq.report, -1)
				if selected {
					seq.report[len(seq.report)-1] = len(sr.Cases)
				}
			}
			if selected {
				sr.Cases = append(sr.Cases, CaseResult{Name: c.Name, Kind: c.Kind()})
			}
		}
		if len(sr.Cases) == 0 {
			continue
		}
		if s.Sequential {
			last := len(seq.report) - 1
			for seq.report[last] < 0 {
				last--
			}
			seq.cases, seq.report = seq.cases[:last+1], seq.report[:last+1]
			jobs = append(jobs, seq)
		}
		rep.Suites = append(rep.Suites, sr)
	}
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		wd := j.s.initial
		for k, c := range j.cases {
			r := &CaseResult{}
			if j.report[k] >= 0 {
				r = &rep.Suites[j.si].Cases[j.report[k]]
			}
			wd = j.s.run(ctx, wd, c, r, now)
		}
	})
	for _, sr := range rep.Suites {
		for _, c := range sr.Cases {
			rep.Cases++
			if c.Passed {
				rep.Passed++
			} else {
				rep.Failed++
			}
		}
	}
	rep.Duration = time.Since(start)
	return rep
}

// run runs one case in a world into its result, and returns the world the next case of a
// sequential suite runs in.
func (s *Suite) run(ctx context.Context, wd *world, c *Case, r *CaseResult, now time.Time) *world {
	if !s.Now.IsZero() {
		now = s.Now
	}
	next := wd
	switch {
	case c.Write != nil:
		w := c.Write
		if !w.resolved {
			var err error
			if w, err = w.resolve(wd.fx); err != nil {
				r.Failure = "the case cannot run: " + err.Error()
				break
			}
		}
		v, stored := wd.admit(ctx, w)
		r.Expected, r.Got, r.Message = w.Expect.String(), v.String(), v.Message
		r.Failure = w.Expect.Judge(v)
		if s.Sequential && v.Error == "" && len(v.Deny) == 0 && !w.DryRun {
			var err error
			if next, err = wd.store(w, stored, now); err != nil {
				r.Failure = joinProblems(r.Failure, "storing the write: "+err.Error())
				next = wd
			}
		}
	case c.Audit != nil:
		findings, err := wd.audit(now)
		if err != nil {
			r.Failure = "the audit failed: " + err.Error()
			break
		}
		r.Failure = c.Audit.judge(findings)
	default:
		e, err := explain.Claim(wd.st.explainInput(wd.fx, s.Engines.Engine(), c.Explain.Identity, now), c.Explain.Namespace, c.Explain.Name)
		if err != nil {
			r.Failure = "explain failed: " + err.Error()
			break
		}
		r.Got = e.Verdict.Text.String()
		r.Failure = c.Explain.judge(e)
	}
	r.Passed = r.Failure == ""
	return next
}

func joinProblems(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// auditOnce holds a suite's audit: every audit case reads the one audit of the fixtures.
type auditOnce struct {
	once     sync.Once
	findings []policy.Finding
	err      error
}

// audit audits the fixtures as `pvguard audit -f` audits manifests: the engine's Audit of the
// state, once per world.
func (wd *world) audit(now time.Time) ([]policy.Finding, error) {
	wd.audits.once.Do(func() {
		wd.audits.findings, wd.audits.err = wd.engines.Engine().Audit(wd.st.cluster, now, nil)
	})
	return wd.audits.findings, wd.audits.err
}

// findingKey names a finding's object as suites name objects.
func findingKey(f policy.Finding) string {
	return objectKey(string(f.Object.Kind), f.Object.Namespace, f.Object.Name)
}

func (fe FindingExpectation) matches(f policy.Finding) bool {
	return string(f.Rule) == fe.Rule &&
		(fe.Object == "" || fe.Object == findingKey(f)) &&
		(fe.Action == "" || fe.Action == f.Action) &&
		(fe.Message == nil || fe.Message.MatchString(f.String()))
}

func (fe FindingExpectation) String() string {
	s := fe.Rule
	if fe.Object != "" {
		s += " on " + fe.Object
	}
	if fe.Action != "" {
		s += " (" + string(fe.Action) + ")"
	}
	if fe.Message != nil {
		s += fmt.Sprintf(" matching %q", fe.Message)
	}
	return s
}

func describeFinding(f policy.Finding) string {
	return fmt.Sprintf("%s on %s (%s)", f.Rule, findingKey(f), f.Action)
}

// judge compares the audit's findings with the case: "" when they agree.
func (a *AuditCase) judge(findings []policy.Finding) string {
	var problems []string
	for _, fe := range a.Findings {
		if !slices.ContainsFunc(findings, fe.matches) {
			problems = append(problems, "expected a finding "+fe.String()+", got none")
		}
	}
	if a.Exact {
		for _, f := range findings {
			if !slices.ContainsFunc(a.Findings, func(fe FindingExpectation) bool { return fe.matches(f) }) {
				problems = append(problems, "unexpected finding "+describeFinding(f)+": "+f.String())
			}
		}
	}
	if len(problems) == 0 {
		return ""
	}
	if !a.Exact {
		var got []string
		for _, f := range findings {
			got = append(got, describeFinding(f))
		}
		if len(got) == 0 {
			got = []string{"none"}
		}
		problems = append(problems, "the audit found: "+strings.Join(got, ", "))
	}
	return strings.Join(problems, "; ")
}

// judge compares an explanation with the case: "" when they agree.
func (x *ExplainCase) judge(e *explain.Explanation) string {
	var problems []string
	if x.WaitingFor != "" && x.WaitingFor != e.WaitingFor {
		problems = append(problems, fmt.Sprintf("expected waitingFor %s, got %s (state: %s)", x.WaitingFor, e.WaitingFor, e.State.String()))
	}
	if x.ProvisionerRunning != "" && x.ProvisionerRunning != e.ProvisionerRunning {
		problems = append(problems, fmt.Sprintf("expected provisionerRunning %s, got %s (state: %s)", x.ProvisionerRunning, orNone(e.ProvisionerRunning), e.State.String()))
	}
	if x.State != nil && !x.State.MatchString(e.State.String()) {
		problems = append(problems, fmt.Sprintf("expected a state matching %q, got %q", x.State, e.State.String()))
	}
	if x.Verdict != nil && !x.Verdict.MatchString(e.Verdict.Text.String()) {
		problems = append(problems, fmt.Sprintf("expected a verdict matching %q, got %q", x.Verdict, e.Verdict.Text.String()))
	}
	if x.Volume != nil && *x.Volume != e.Verdict.Volume.String() {
		problems = append(problems, fmt.Sprintf("expected the verdict to give volume %s, got %s (%s)", orNone(*x.Volume), orNone(e.Verdict.Volume.String()), e.Verdict.Text.String()))
	}
	if x.Closest != nil && *x.Closest != e.Verdict.Closest.String() {
		problems = append(problems, fmt.Sprintf("expected the closest volume %s, got %s (%s)", orNone(*x.Closest), orNone(e.Verdict.Closest.String()), e.Verdict.Text.String()))
	}
	for _, ce := range x.Candidates {
		i := slices.IndexFunc(e.Candidates, func(c explain.Candidate) bool { return c.Volume == ce.Volume })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("expected a row for volume %s, got none", ce.Volume))
			continue
		}
		problems = append(problems, ce.judge(e.Candidates[i])...)
	}
	return strings.Join(problems, "; ")
}

func (ce CandidateExpectation) judge(c explain.Candidate) []string {
	var problems []string
	var failing []string
	for _, r := range c.Failed() {
		failing = append(failing, string(r.Check))
	}
	if ce.Fits != nil && *ce.Fits != c.Fits {
		problems = append(problems, fmt.Sprintf("expected volume %s fits=%t, got fits=%t (failing: %s)", c.Volume, *ce.Fits, c.Fits, describeFailed(c)))
	}
	if ce.Failing != nil {
		want := sorted(slices.Clone(*ce.Failing))
		if !slices.Equal(want, sorted(slices.Clone(failing))) {
			problems = append(problems, fmt.Sprintf("expected volume %s failing [%s], got [%s]", c.Volume, strings.Join(want, " "), describeFailed(c)))
		}
	}
	if ce.TakenBy != nil && *ce.TakenBy != c.TakenBy.String() {
		problems = append(problems, fmt.Sprintf("expected volume %s taken by %s, got %s", c.Volume, orNone(*ce.TakenBy), orNone(c.TakenBy.String())))
	}
	return problems
}

// describeFailed lists a row's failing checks with their values: "capacity (50Gi < 100Gi)".
func describeFailed(c explain.Candidate) string {
	var out []string
	for _, r := range c.Failed() {
		out = append(out, fmt.Sprintf("%s (%s)", r.Check, r.Value))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
