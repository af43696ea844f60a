package charts_test

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pvguard/pvguard/charts"
)

// sizingMarker marks the row of docs/install.md's sizing table the chart's defaults follow.
const sizingMarker = "(chart default)"

// TestDefaultResourcesFollowSizingTable holds the chart's default memory request and limit to
// the row of the documented sizing table (measured by hack/bench/scale) they claim to be, so
// that neither changes without the other.
func TestDefaultResourcesFollowSizingTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	wantRequest, wantLimit := sizingRow(t, string(doc))

	manifests, err := charts.Render(release, namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeAll(t, manifests)
	d := r.one(t, "Deployment").(*appsv1.Deployment)
	var res corev1.ResourceRequirements
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "pvguard" {
			res = c.Resources
		}
	}
	if got := res.Requests[corev1.ResourceMemory]; got.Cmp(wantRequest) != 0 {
		t.Errorf("default memory request %s, docs/install.md's %s row says %s", got.String(), sizingMarker, wantRequest.String())
	}
	if got := res.Limits[corev1.ResourceMemory]; got.Cmp(wantLimit) != 0 {
		t.Errorf("default memory limit %s, docs/install.md's %s row says %s", got.String(), sizingMarker, wantLimit.String())
	}
}

// sizingRow finds the one table row carrying sizingMarker and reads its memory request and limit
// (the columns headed "memory request" and "memory limit").
func sizingRow(t *testing.T, doc string) (request, limit resource.Quantity) {
	t.Helper()
	var header []string
	var row []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if strings.Contains(line, sizingMarker) {
			if row != nil {
				t.Fatalf("docs/install.md: more than one row carries %q", sizingMarker)
			}
			row = make([]string, 0, len(cells))
			row = append(row, cells...)
			reqCol, limCol := indexOf(header, "memory request"), indexOf(header, "memory limit")
			if reqCol < 0 || limCol < 0 || reqCol >= len(row) || limCol >= len(row) {
				t.Fatalf("docs/install.md: the %q row's table has no \"memory request\" and \"memory limit\" columns (header %q)", sizingMarker, header)
			}
			var err error
			if request, err = resource.ParseQuantity(strings.Trim(row[reqCol], "`")); err != nil {
				t.Fatalf("docs/install.md: memory request %q: %v", row[reqCol], err)
			}
			if limit, err = resource.ParseQuantity(strings.Trim(row[limCol], "`")); err != nil {
				t.Fatalf("docs/install.md: memory limit %q: %v", row[limCol], err)
			}
		}
	}
	if row == nil {
		t.Fatalf("docs/install.md: no sizing row carries %q", sizingMarker)
	}
	return request, limit
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if strings.EqualFold(x, v) {
			return i
		}
	}
	return -1
}
