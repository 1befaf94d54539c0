# The OTLP export's interop test (appliance/otlp/otlptest) is a module of its
# own: the OpenTelemetry collector's OTLP receiver, its real peer, brings about
# 80 modules that stay out of linerate's go.mod.
#
#   make test-otlp   vet it and run it (part of `make test`)

.PHONY: test-otlp

TEST_EXTRA += test-otlp

test-otlp:
	cd appliance/otlp/otlptest && $(GO) mod download && $(GO) vet ./... && \
		CI=$${CI:-true} $(GO) test $(TESTFLAGS) ./...
