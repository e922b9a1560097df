// Package telemetry is what operators see of a running instance: every
// Prometheus metric the service exports, defined here and nowhere else, and
// the OpenTelemetry tracing the packages share (the tracer, the W3C trace
// context carried with ledger events, the OTLP exporter).
//
// Metric names are fixed: dashboards and alert rules in deploy/ rely on
// them. Label values are bounded by construction (route templates, methods,
// status codes, outcomes from fixed lists); no label ever holds a partner
// id, an API key, an endpoint id, a phone number or anything else a caller
// chooses. A nil *Metrics records nothing, so commands that open the ledger
// without serving (the operator CLI) need no registry.
//
// What it may import is checked by TestImportRules (internal/imports).
package telemetry
