package explain

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// columns heads the checks' columns in WriteText.
var columns = map[Check]string{
	CheckClass: "CLASS", CheckAttributesClass: "VAC", CheckAccessModes: "ACCESS", CheckVolumeMode: "MODE",
	CheckCapacity: "CAPACITY", CheckSelector: "SELECTOR", CheckNodeAffinity: "NODE", CheckPhase: "PHASE",
	CheckClaimRef: "CLAIMREF", CheckReserved: "RESERVED", CheckPolicy: "POLICY",
}

// Heading is the check's column heading ("MODE" for volumeMode), in the text and on the
// dashboard's page.
func (c Check) Heading() string { return columns[c] }

// Cell is what the check's column shows: "ok", or the failing value.
func (r Result) Cell() string {
	if r.Pass {
		return "ok"
	}
	return r.Value.String()
}

// Table splits the candidates as people read them (WriteText, the dashboard's page): the volumes
// of the claim's class, a row each, and those of other classes summed up in one line ("" when
// there are none).
func (e *Explanation) Table() (rows []Candidate, others string) {
	byClass := map[string]int{}
	for _, cand := range e.Candidates {
		if cand.Class != e.Class {
			byClass[orNone(cand.Class)]++
			continue
		}
		rows = append(rows, cand)
	}
	if len(byClass) > 0 {
		var parts []string
		n := 0
		for class, count := range byClass {
			parts = append(parts, fmt.Sprintf("%s: %d", class, count))
			n += count
		}
		sort.Strings(parts)
		others = fmt.Sprintf("%d volume(s) of other classes (%s)", n, strings.Join(parts, ", "))
	}
	// The server lists only the closest candidates and counts the rest (Others).
	if len(e.Others) > 0 {
		var parts []string
		n := 0
		for _, g := range e.Others {
			parts = append(parts, fmt.Sprintf("%s: %d", g.Failing, g.Count))
			n += g.Count
		}
		more := fmt.Sprintf("%d more candidate(s) not listed, by the first check each fails (%s)", n, strings.Join(parts, ", "))
		if others != "" {
			more = others + "; " + more
		}
		others = more
	}
	return rows, others
}

// WriteText writes the explanation for people: the state, the table of the volumes of the
// claim's class (those of other classes in one line), and the verdict.
func WriteText(w io.Writer, e *Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "PersistentVolumeClaim %s: %s\n", e.Claim, orPhase(e.Phase))
	fmt.Fprintf(&b, "Class: %s", orNone(e.Class))
	if e.BindingMode != "" {
		fmt.Fprintf(&b, " (%s)", e.BindingMode)
	}
	if e.SelectedNode != "" {
		fmt.Fprintf(&b, ", selected node %s", e.SelectedNode)
	}
	fmt.Fprintf(&b, "\nState: %s\n", e.State)
	for _, r := range e.Refused {
		fmt.Fprintf(&b, "Refused: %s", r.Point)
		if r.Name != "" {
			fmt.Fprintf(&b, " %s", r.Name)
		}
		if r.Rule != "" {
			fmt.Fprintf(&b, " (%s)", r.Rule)
		}
		fmt.Fprintf(&b, ": %s", r.Reason)
		if r.Source != "" {
			fmt.Fprintf(&b, " from %s", r.Source)
		}
		fmt.Fprintf(&b, ", %d time(s), last %s\n", r.Count, r.Last.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	head := []string{"VOLUME"}
	for _, c := range Checks {
		head = append(head, c.Heading())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	rows, others := e.Table()
	for _, cand := range rows {
		cells := []string{cand.Volume}
		for _, r := range cand.Checks {
			cells = append(cells, r.Cell())
		}
		if !cand.TakenBy.IsZero() {
			cells[0] += " (planned for " + cand.TakenBy.String() + ")"
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintf(&b, "(no volume of class %s)\n", orNone(e.Class))
	}
	if others != "" {
		fmt.Fprintln(&b, others)
	}
	for _, h := range e.Hidden {
		fmt.Fprintln(&b, h.Text)
	}
	fmt.Fprintf(&b, "\nVerdict: %s\n", e.Verdict.Text)
	_, err := io.WriteString(w, b.String())
	return err
}

func orPhase(p string) string {
	if p == "" {
		return "no phase"
	}
	return p
}

// WriteVolumeText writes a volume's explanation for people.
func WriteVolumeText(w io.Writer, e *VolumeExplanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "PersistentVolume %s: %s", e.Volume, orPhase(e.Phase))
	if e.Since != nil {
		fmt.Fprintf(&b, " since %s", e.Since.Format("2006-01-02T15:04:05Z"))
	}
	fmt.Fprintf(&b, ", reclaim policy %s\n", e.ReclaimPolicy)
	if !e.Claim.IsZero() {
		fmt.Fprintf(&b, "Claim: %s (%s)\n", e.Claim, e.ClaimState)
	} else {
		fmt.Fprintln(&b, "Claim: none")
	}
	fmt.Fprintf(&b, "Next: %s\n", e.Next)
	for _, f := range e.Finalizers {
		fmt.Fprintf(&b, "Finalizer %s: held by %s; it waits for %s\n", f.Name, f.Holder, f.WaitsFor)
	}
	if len(e.Findings) == 0 {
		fmt.Fprintln(&b, "Findings: none")
	}
	for _, f := range e.Findings {
		fmt.Fprintf(&b, "Finding: %s\n", f)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
