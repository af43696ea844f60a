// Package web is pvguard's one HTTP layer: the chi router and the TLS server (Server) that serve
// the admission webhooks (package webhook's handlers), health, readiness and metrics (and, on the
// plain metrics address only, profiles), the audit's report and dashboard (ReportHandler,
// DashboardHandler, and RenderDashboard for `pvguard audit -o html`), and the explanations that
// package explain's Service returns, as JSON and pages (ExplainAPIHandler, ExplainPagesHandler,
// explain.go: the routes, the status of each of its errors, Retry-After, the page and its
// Content-Security-Policy). The read endpoints sit behind internal/access's guard: each caller
// presents a bearer token and sees what Kubernetes RBAC lets them list; the report and the
// dashboard are cut down to that here (visible.go), the explanations by package explain
// (explain/visible.go).
package web
