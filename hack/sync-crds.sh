#!/usr/bin/env bash
# Copies the openreports.io CRDs, unmodified, from the reports-api module version go.mod pins into
# the chart. Run it after bumping github.com/openreports/reports-api; a test fails while the
# chart's copies differ from the pinned module's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src="$(go list -m -f '{{.Dir}}' github.com/openreports/reports-api)/config/crd"
for f in openreports.io_reports.yaml openreports.io_clusterreports.yaml; do
  install -m 0644 "$src/$f" "charts/pvguard/crds/$f"
done
