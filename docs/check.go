// Package docs is pvguard's documentation. Its Go code is the check that keeps the pages in step
// with a rule set: the docs test runs it on the Catalogue, and a test that adds a rule runs it on
// a set with that rule.
package docs

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/pvguard/pvguard/policy"
)

// Pages are the documentation's pages, as shipped in this directory.
//
//go:embed *.md
var Pages embed.FS

// auditOnlyHeading opens the section of rules.md that lists the rules only the audit runs.
const auditOnlyHeading = "\n## Audit-only rules\n"

// changeList introduces, in any page, the list of the rules that judge a change.
const changeList = "judge a change ("

// CheckRules lists where the pages disagree with a rule set, from what each rule declares:
//   - rules.md has a row "| ID | name | default |" for every rule, in the section "Audit-only
//     rules" for a rule that only the audit runs and before it for the others;
//   - wherever a page lists the rules that "judge a change (...)", it lists exactly the rules of
//     the set that do (policy.JudgesChange), in order.
func CheckRules(pages fs.FS, rules []policy.Rule) []error {
	var errs []error
	data, err := fs.ReadFile(pages, "rules.md")
	if err != nil {
		return []error{err}
	}
	reference := string(data)
	auditOnly := strings.Index(reference, auditOnlyHeading)
	if auditOnly < 0 {
		errs = append(errs, fmt.Errorf("rules.md has no heading %q", strings.TrimSpace(auditOnlyHeading)))
	}
	sectionEnd := len(reference)
	if next := strings.Index(reference[auditOnly+1:], "\n## "); auditOnly >= 0 && next >= 0 {
		sectionEnd = auditOnly + 1 + next
	}
	var changes []string
	for _, rl := range rules {
		if rl.Judges == policy.JudgesChange {
			changes = append(changes, string(rl.ID))
		}
		row := "| " + string(rl.ID) + " | " + rl.Name + " | " + string(rl.Default) + " |"
		at := strings.Index(reference, row)
		inAuditOnly := at > auditOnly && at < sectionEnd
		switch {
		case at < 0:
			errs = append(errs, fmt.Errorf("rules.md has no row starting %q", row))
		case auditOnly < 0:
		case rl.Judges.AtAdmission() && inAuditOnly:
			errs = append(errs, fmt.Errorf("rules.md lists %s, which admission runs, under %q", rl.ID, strings.TrimSpace(auditOnlyHeading)))
		case !rl.Judges.AtAdmission() && !inAuditOnly:
			errs = append(errs, fmt.Errorf("rules.md lists %s, which only the audit runs, outside %q", rl.ID, strings.TrimSpace(auditOnlyHeading)))
		}
	}
	want := strings.Join(changes, ", ")
	err = fs.WalkDir(pages, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		data, err := fs.ReadFile(pages, path)
		if err != nil {
			return err
		}
		text := strings.Join(strings.Fields(string(data)), " ")
		for rest := text; ; {
			i := strings.Index(rest, changeList)
			if i < 0 {
				break
			}
			rest = rest[i+len(changeList):]
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				end = len(rest)
			}
			if got := rest[:end]; got != want {
				errs = append(errs, fmt.Errorf("%s lists the rules that judge a change as %q, the rules declare %q", path, got, want))
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}
