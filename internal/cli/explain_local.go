package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pvguard/pvguard/explain"
)

// This file writes a claim's local explanation: the closest candidates, and the others and
// what the read left out counted.

// localTop is how many candidates a local explanation shows without --all-candidates: the
// closest, which the verdict names; the others are counted by the check they fail first.
const localTop = 20

// explainLocally explains the claim namespace/name of in and writes it: without
// --all-candidates, the closest localTop candidates and the others counted (compactCandidates);
// and what the read left out (settled), after the table, or on errOut for -o json.
func explainLocally(o ExplainFlags, in explain.Input, settled settledPairs, namespace, name string, out, errOut io.Writer) error {
	e, err := explain.Claim(in, namespace, name)
	if errors.Is(err, explain.ErrUnknownClaim) {
		return badInput("%v", err)
	}
	if err != nil {
		return err
	}
	var notes []string
	if !o.AllCandidates {
		if note := compactCandidates(e, localTop); note != "" {
			notes = append(notes, note)
		}
	}
	if note := settled.note(); note != "" {
		notes = append(notes, note)
	}
	if err := writeExplanation(out, o.Output, e); err != nil {
		return err
	}
	w := out
	if o.Output == "json" {
		w = errOut
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// compactCandidates keeps e's top closest candidates and says how many it left out, counted by
// the first check each fails ("" when it left none out). The verdict is made before: it names
// the closest, which stay.
func compactCandidates(e *explain.Explanation, top int) string {
	if len(e.Candidates) <= top {
		return ""
	}
	rest := e.Candidates[top:]
	e.Candidates = e.Candidates[:top:top]
	counts := map[explain.Check]int{}
	for _, c := range rest {
		first := explain.Check("fits")
		if f := c.Failed(); len(f) > 0 {
			first = f[0].Check
		}
		counts[first]++
	}
	var parts []string
	for _, c := range append(slices.Clone(explain.Checks), "fits") {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d fail %s", n, c))
		}
	}
	if n := counts["fits"]; n > 0 {
		parts[len(parts)-1] = fmt.Sprintf("%d fit", n)
	}
	return fmt.Sprintf("%d more candidate volume(s) not shown (--all-candidates shows them): %s.", len(rest), strings.Join(parts, ", "))
}

// note says what a local read left out, "" for nothing.
func (s settledPairs) note() string {
	if s.Total == 0 {
		return ""
	}
	classes := make([]string, 0, len(s.ByClass))
	for c := range s.ByClass {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	var byClass, byCheck []string
	for _, c := range classes {
		byClass = append(byClass, fmt.Sprintf("%s %d", orNone(c), s.ByClass[c]))
	}
	for _, c := range explain.Checks {
		if n := s.ByCheck[c]; n > 0 {
			byCheck = append(byCheck, fmt.Sprintf("%d fail %s first", n, c))
		}
	}
	if n := s.ByCheck[""]; n > 0 {
		byCheck = append(byCheck, fmt.Sprintf("%d not checked: they cannot be closer than those shown", n))
	}
	return fmt.Sprintf("%d more volume(s) bound to other claims or released were counted, not kept (by class: %s; %s).",
		s.Total, strings.Join(byClass, ", "), strings.Join(byCheck, ", "))
}

// orNone shows the empty class name as "".
func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
