// Package otlptest holds the OTLP export's interop test, in a module of its
// own: the OpenTelemetry collector's OTLP receiver brings about 80 modules,
// which stay out of linerate's go.mod. `make test` runs it (mk/otlp.mk).
package otlptest
