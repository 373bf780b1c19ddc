# ifmeter: `make run` (the main job) and `make test`. Both install any
# missing Debian package first, so a fresh Debian 12 machine with Swift
# needs nothing else.

SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
BUILD_PACKAGES := pkg-config libnl-3-dev libnl-route-3-dev libmicrohttpd-dev zlib1g-dev libsqlite3-dev iproute2
# promtool and a real Prometheus server, node_exporter to compare with,
# the reference OpenMetrics parser (prometheus_client, for /usr/bin/python3),
# and xmllint and headless Chromium to check and render usage charts (SVG).
TEST_PACKAGES := $(BUILD_PACKAGES) prometheus prometheus-node-exporter gzip python3-prometheus-client python3-venv \
	tmux procps sqlite3 util-linux libxml2-utils chromium
BENCH_PACKAGES := $(BUILD_PACKAGES) wrk prometheus-node-exporter tmux time
RUN_ARGS ?= live

.PHONY: run test bench build release deps clean

deps:
	@scripts/ensure-packages $(BUILD_PACKAGES)

release: deps
	$(SWIFT) build -c release --static-swift-stdlib --product ifmeter

run: release
	@.build/release/ifmeter $(RUN_ARGS)

build: deps
	$(SWIFT) build

test:
	@scripts/ensure-packages $(TEST_PACKAGES)
	@scripts/ensure-venv
	$(SWIFT) build
	$(SWIFT) test

bench:
	@scripts/ensure-packages $(BENCH_PACKAGES)
	$(SWIFT) build -c release --static-swift-stdlib
	.build/release/ifmeter-bench

clean:
	$(SWIFT) package clean
