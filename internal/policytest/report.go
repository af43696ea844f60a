package policytest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes a report as `go test` does: a line per failing case (with verbose, per
// passing case too), naming the suite's file and the case, then ok or FAIL with the counts. errs
// are the problems met reading the suites (reported on their own): with any, the run FAILs.
func WriteText(out io.Writer, rep Report, errs []error, verbose bool) error {
	var b strings.Builder
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			switch {
			case !c.Passed:
				fmt.Fprintf(&b, "--- FAIL: %s: %s: %s\n", s.where, c.Name, oneLine(c.Failure))
			case verbose:
				fmt.Fprintf(&b, "--- PASS: %s: %s", s.where, c.Name)
				if c.Got != "" {
					fmt.Fprintf(&b, " (%s)", oneLine(c.Got))
				}
				b.WriteString("\n")
			}
		}
	}
	counts := fmt.Sprintf("%d %s, %d %s", len(rep.Suites), plural(len(rep.Suites), "suite", "suites"), rep.Cases, plural(rep.Cases, "case", "cases"))
	switch {
	case rep.Failed > 0 && len(errs) > 0:
		fmt.Fprintf(&b, "FAIL\t%s: %d failed, %d passed; %d %s reading the suites (%.3fs)\n", counts, rep.Failed, rep.Passed,
			len(errs), plural(len(errs), "problem", "problems"), rep.Duration.Seconds())
	case rep.Failed > 0:
		fmt.Fprintf(&b, "FAIL\t%s: %d failed, %d passed (%.3fs)\n", counts, rep.Failed, rep.Passed, rep.Duration.Seconds())
	case len(errs) > 0:
		fmt.Fprintf(&b, "FAIL\t%s passed; %d %s reading the suites (%.3fs)\n", counts, len(errs), plural(len(errs), "problem", "problems"), rep.Duration.Seconds())
	default:
		fmt.Fprintf(&b, "ok  \t%s passed (%.3fs)\n", counts, rep.Duration.Seconds())
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// JSONReport is the shape of `pvguard test -o json`.
type JSONReport struct {
	// OK is true when every case ran passed and every suite could be read.
	OK      bool          `json:"ok"`
	Summary JSONSummary   `json:"summary"`
	Suites  []SuiteResult `json:"suites"`
	// Errors are the suites that could not be read, each naming its file, document and field.
	Errors []string `json:"errors,omitempty"`
}

// JSONSummary counts a run.
type JSONSummary struct {
	Suites  int     `json:"suites"`
	Cases   int     `json:"cases"`
	Passed  int     `json:"passed"`
	Failed  int     `json:"failed"`
	Seconds float64 `json:"seconds"`
}

// WriteJSON writes a report and the errors met reading the suites as JSON.
func WriteJSON(out io.Writer, rep Report, errs []error) error {
	j := JSONReport{
		OK:      rep.Failed == 0 && len(errs) == 0,
		Summary: JSONSummary{Suites: len(rep.Suites), Cases: rep.Cases, Passed: rep.Passed, Failed: rep.Failed, Seconds: rep.Duration.Seconds()},
		Suites:  rep.Suites,
	}
	if j.Suites == nil {
		j.Suites = []SuiteResult{}
	}
	for _, e := range errs {
		j.Errors = append(j.Errors, e.Error())
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(j)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// oneLine keeps a message on its line.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " | ") }
