# ifmeter: `make run` (the main job) and `make test`. Both install any
# missing Debian package first, so a fresh Debian 12 machine with Swift
# needs nothing else.

SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
BUILD_PACKAGES := pkg-config libnl-3-dev libmicrohttpd-dev libcrypt-dev zlib1g-dev libsqlite3-dev iproute2 libcurl4-openssl-dev libsnappy-dev libyaml-dev \
	libcairo2-dev \
	libstdc++-12-dev
# promtool and a real Prometheus server, node_exporter to compare with,
# the reference OpenMetrics parser (prometheus_client, for /usr/bin/python3);
# curl, openssl (test certificates) and htpasswd (bcrypt hashes) for --web-config;
# man-db, groff, bash-completion, zsh, fish and systemd check what
# `make install` puts: pages, completions and the service (InstallTests);
# xmllint and headless Chromium check and render usage charts (SVG);
# chromium-driver and python3-selenium drive Chromium for the browser tests
# of serve's pages (scripts/browser-driver, IfmeterTestSupport's Browser);
# eu-stack (elfutils) shows where a test run past its time limit waits;
# readelf and nm (binutils) check how the release binary is linked.
TEST_PACKAGES := $(BUILD_PACKAGES) prometheus prometheus-node-exporter gzip python3-prometheus-client python3-venv \
	tmux procps sqlite3 util-linux curl openssl apache2-utils man-db groff bash-completion zsh fish systemd \
	libxml2-utils chromium chromium-driver python3-selenium elfutils binutils protobuf-compiler
BENCH_PACKAGES := $(BUILD_PACKAGES) wrk prometheus-node-exporter tmux time vnstat sqlite3 curl
# `make deb` (issue 24): debhelper and dpkg-dev build the package from
# debian/ (dpkg-buildpackage; chrpath for debian/rules), lintian checks
# it; fakeroot for a builder that sets Rules-Requires-Root otherwise (this
# package needs no root).
DEB_PACKAGES := $(BUILD_PACKAGES) debhelper dpkg-dev fakeroot lintian chrpath
RUN_ARGS ?= live
# The release build, linked for a small resident set (issue 9: serve's peak
# RSS). The kernel maps a binary's code a folio at a time around each first
# touch, so what stays resident is set by how far apart the functions a
# command runs lie. So: each Swift function in its own section, laid out in
# the order of scripts/hot-functions.txt (the functions serve, export,
# sample and live run, recorded by `make hot-functions`); relative
# relocations packed (DT_RELR, glibc 2.36) instead of 500 KB of them read at
# every start; no dynamic symbol table (nothing loads symbols from the
# executable); and libstdc++, which only the Swift runtime uses, linked
# statically: the .a in $(STATIC_CXX) is found before the shared one.
STATIC_CXX := .build/static-libstdc++
# SwiftPM does not know the layout list is an input of the link: a newer
# list removes the binary, so the build links it again. Nor does it compile
# again when only -Xswiftc flags change: a release tree built with other
# flags (.build/release-flags says which) is removed first.
RELEASE_INPUTS_CHECK = @flags='$(RELEASE_FLAGS)'; \
	if [ "$$(cat .build/release-flags 2>/dev/null)" != "$$flags" ]; then \
	  rm -rf $(RELEASE_SCRATCH)/*-linux-gnu/release; mkdir -p .build; printf '%s\n' "$$flags" > .build/release-flags; fi; \
	if [ scripts/hot-functions.txt -nt $(RELEASE_SCRATCH)/release/ifmeter ]; then rm -f $(RELEASE_SCRATCH)/release/ifmeter; fi
# The release tree has a scratch folder of its own, so that SwiftPM's lock
# on it is not the debug tree's: make test builds it while the tests run
# (scripts/test-beside-release). .build/release points into it, where
# SwiftPM would put it.
RELEASE_SCRATCH := .build/optimized
RELEASE_LINK = @ln -sfn optimized/release .build/release
RELEASE_FLAGS := --scratch-path $(RELEASE_SCRATCH) -c release --static-swift-stdlib \
	-Xswiftc -Xfrontend -Xswiftc -function-sections -Xswiftc -use-ld=lld \
	-Xswiftc -L -Xswiftc $(CURDIR)/$(STATIC_CXX) \
	-Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic \
	-Xlinker --symbol-ordering-file=$(CURDIR)/scripts/hot-functions.txt -Xlinker --no-warn-symbol-ordering
# The test run takes 3 to 4 minutes here (make test on a fresh clone 6 to 7.5); past this many seconds it is
# stopped with a report of what was still running (scripts/run-with-limit).
TEST_TIME_LIMIT ?= 1500
TEST_BUILD_FLAGS ?= -Xswiftc -gnone

# `make install` and `make uninstall`: the usual PREFIX and DESTDIR. BINARY=
# installs that binary instead of building the release one (the tests use it).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPLETIONDIR ?= $(PREFIX)/share/zsh/vendor-completions
FISHCOMPLETIONDIR ?= $(PREFIX)/share/fish/vendor_completions.d
# Where Debian's packages put units for PREFIX=/usr; under the prefix otherwise
# (systemd also reads /usr/local/lib/systemd/system).
SYSTEMDUNITDIR ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
# The Prometheus rules with their promtool suite, the Grafana dashboard,
# and the alerts' runbook, which every alert's runbook_url points at (here,
# not under share/doc, which packages may compress or leave out).
DATADIR ?= $(PREFIX)/share/ifmeter
# Where every alert's runbook_url points, before its #ALERT: empty keeps the
# rules' own, the alerting host's serve (http://HOST:9874/runbooks, HOST the
# instance label without its port: docs/alerts.md says why); a URL puts
# that in the installed rules and their promtool suite instead, e.g.
# RUNBOOK_BASE=https://wiki.example/ifmeter-alerts (a Prometheus template in
# it, $$ for each $, fits the rules but not the suite's rendered values).
RUNBOOK_BASE ?=
RUNBOOK_SED = s|\(runbook_url: "\)[^"\#]*\#|\1$(subst |,\|,$(subst &,\&,$(subst \,\\,$(RUNBOOK_BASE))))\#|
# The config file the service reads (/etc/ifmeter/ifmeter.yml for /usr):
# every setting commented out; installed only where none is (an edited one
# is kept), a conffile in the .deb.
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
BINARY ?=
INSTALL_BINARY := $(if $(BINARY),$(BINARY),.build/release/ifmeter)
GENERATED := .build/install
INSTALLED_DIRS := $(BINDIR) $(MANDIR)/man1 $(BASHCOMPLETIONDIR) $(ZSHCOMPLETIONDIR) $(FISHCOMPLETIONDIR) $(SYSTEMDUNITDIR) \
	$(DATADIR)/prometheus $(DATADIR)/grafana $(SYSCONFDIR)/ifmeter

.PHONY: bench-usage run test bench build release deps clean install uninstall hot-functions static-cxx docs api-check api-baseline portable-check format deb deb-lint

deps:
	@scripts/ensure-packages $(BUILD_PACKAGES)

# The static libstdc++ the release link takes, alone in its folder.
static-cxx: deps
	@mkdir -p $(STATIC_CXX)
	@archive=$$($(dir $(realpath $(SWIFT)))clang -print-file-name=libstdc++.a); \
	test -f "$$archive" || { echo "Error: no static libstdc++ (libstdc++.a). Hint: apt-get install libstdc++-12-dev" >&2; exit 1; }; \
	ln -sfn "$$archive" $(STATIC_CXX)/libstdc++.a

release: static-cxx
	@scripts/write-revision
	$(RELEASE_INPUTS_CHECK)
	$(SWIFT) build $(RELEASE_FLAGS) --product ifmeter
	$(RELEASE_LINK)

run: release
	@.build/release/ifmeter $(RUN_ARGS)

build: deps
	@scripts/write-revision
	$(SWIFT) build

# The tests' Python tools installed meanwhile, the debug build of
# everything with the tests, the checks that read it, then the test run
# with the release build, the Debian package and the portable build made
# beside it (scripts/test-beside-release): `make run` builds the release
# binary, and a release build sees imports a debug build forgives (a
# missing C module import broke it once). DebianPackageTests installs and
# purges the package it made, after the rest of the run.
# The debug build has no debug information (TEST_BUILD_FLAGS): on this
# two-core machine it took 109 s instead of 131 (204 CPU-seconds instead of
# 243), and no test reads it. `make docs` and `make api-check` build with
# the same flags; a plain `swift build` or `swift test` in the same tree
# afterwards builds again, with it.
test:
	@scripts/ensure-packages $(TEST_PACKAGES) $(DEB_PACKAGES)
	@scripts/ensure-venv --start
	$(SWIFT) format lint --strict -r Sources Tests Package.swift
	@scripts/write-revision
	$(SWIFT) build --build-tests $(TEST_BUILD_FLAGS)
	SWIFT=$(SWIFT) SWIFT_BUILD_FLAGS="$(TEST_BUILD_FLAGS)" scripts/library docs
	SWIFT=$(SWIFT) SWIFT_BUILD_FLAGS="$(TEST_BUILD_FLAGS)" scripts/library api-check
	SWIFT=$(SWIFT) MAKE=$(MAKE) scripts/test-beside-release $(TEST_TIME_LIMIT)

# One style (.swift-format: 4-space indents, 150 columns), which make test
# checks with the toolchain's swift-format; this rewrites the tree in it.
format:
	$(SWIFT) format format -i -r Sources Tests Package.swift

# The app library's DocC catalog, with the toolchain's docc; no warnings.
docs: deps
	SWIFT=$(SWIFT) SWIFT_BUILD_FLAGS="$(TEST_BUILD_FLAGS)" scripts/library docs

# The Ifmeter library with its whole closure, as an Apple platform would
# build it (Linux-only code left out): docs/library.md.
portable-check: deps
	SWIFT=$(SWIFT) scripts/portable-check

# The library's public API against api/Ifmeter.json, the last release's.
api-check: deps
	SWIFT=$(SWIFT) SWIFT_BUILD_FLAGS="$(TEST_BUILD_FLAGS)" scripts/library api-check

# Records api/Ifmeter.json from this tree (at a release), and fails so that
# the new baseline is read before it is committed.
api-baseline: deps
	IFMETER_RECORD_API=1 SWIFT=$(SWIFT) SWIFT_BUILD_FLAGS="$(TEST_BUILD_FLAGS)" scripts/library api-check

bench: static-cxx
	@scripts/ensure-packages $(BENCH_PACKAGES)
	@scripts/write-revision
	$(RELEASE_INPUTS_CHECK)
	$(SWIFT) build $(RELEASE_FLAGS)
	$(RELEASE_LINK)
	.build/release/ifmeter-bench

# Only the usage tables on a five-year state file (issue 31), a minute.
bench-usage: static-cxx
	@scripts/ensure-packages $(BENCH_PACKAGES)
	@scripts/write-revision
	$(RELEASE_INPUTS_CHECK)
	$(SWIFT) build $(RELEASE_FLAGS)
	$(RELEASE_LINK)
	IFMETER_BENCH_ONLY=usage .build/release/ifmeter-bench

# Re-records scripts/hot-functions.txt from the release binary (root;
# valgrind). Commit the result when the functions serve runs moved.
hot-functions: release
	@scripts/ensure-packages valgrind
	scripts/record-hot-functions .build/release/ifmeter scripts/hot-functions.txt

clean:
	$(SWIFT) package clean
	rm -rf $(RELEASE_SCRATCH)

# Man pages and completions come from the binary being installed
# (--generate-manpage, --generate-completion): the same specs as --help.
install: $(if $(BINARY),,release)
	rm -rf $(GENERATED)
	mkdir -p $(GENERATED)/man1
	$(INSTALL_BINARY) --generate-manpage $(GENERATED)/man1
	$(INSTALL_BINARY) --generate-completion bash > $(GENERATED)/ifmeter.bash
	$(INSTALL_BINARY) --generate-completion zsh > $(GENERATED)/_ifmeter
	$(INSTALL_BINARY) --generate-completion fish > $(GENERATED)/ifmeter.fish
	$(INSTALL_BINARY) --generate-config > $(GENERATED)/ifmeter.yml
	$(INSTALL_BINARY) --generate-runbook > $(GENERATED)/alerts.md
	for rules in ifmeter-rules.yml ifmeter-rules-test.yml; do \
		sed '$(if $(RUNBOOK_BASE),$(RUNBOOK_SED))' dist/prometheus/$$rules > $(GENERATED)/$$rules || exit 1; done
	sed 's|@BINDIR@|$(BINDIR)|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' dist/ifmeter-serve.service.in > $(GENERATED)/ifmeter-serve.service
	install -d $(addprefix $(DESTDIR),$(INSTALLED_DIRS))
	install -m 755 $(INSTALL_BINARY) $(DESTDIR)$(BINDIR)/ifmeter
	install -m 644 $(GENERATED)/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(GENERATED)/ifmeter.bash $(DESTDIR)$(BASHCOMPLETIONDIR)/ifmeter
	install -m 644 $(GENERATED)/_ifmeter $(DESTDIR)$(ZSHCOMPLETIONDIR)/_ifmeter
	install -m 644 $(GENERATED)/ifmeter.fish $(DESTDIR)$(FISHCOMPLETIONDIR)/ifmeter.fish
	install -m 644 $(GENERATED)/ifmeter-serve.service $(DESTDIR)$(SYSTEMDUNITDIR)/ifmeter-serve.service
	install -m 644 $(GENERATED)/ifmeter-rules.yml $(GENERATED)/ifmeter-rules-test.yml $(DESTDIR)$(DATADIR)/prometheus/
	install -m 644 dist/grafana/ifmeter.json $(DESTDIR)$(DATADIR)/grafana/
	install -m 644 $(GENERATED)/alerts.md $(DESTDIR)$(DATADIR)/
	[ -e $(DESTDIR)$(SYSCONFDIR)/ifmeter/ifmeter.yml ] || install -m 644 $(GENERATED)/ifmeter.yml $(DESTDIR)$(SYSCONFDIR)/ifmeter/ifmeter.yml

# The Debian package: .build/deb/ifmeter_VERSION_ARCH.deb (VERSION from
# debian/changelog, which debian/rules checks against `ifmeter --version`;
# ARCH from dpkg), built by dpkg-buildpackage from debian/: the release
# build and `make install` into the package's tree, the unit enabled and
# started (debian/README.Debian says why), Depends computed by
# dh_shlibdeps from the binary plus the libraries it dlopen()s. The
# .buildinfo and .changes go beside it, not in the parent folder. Nothing
# is downloaded. dh_clean runs after, so the tree is left as it was.
DEB_DIR := .build/deb
DEB_VERSION = $(shell dpkg-parsechangelog -S Version)
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_FILE = $(DEB_DIR)/ifmeter_$(DEB_VERSION)_$(DEB_ARCH).deb
deb:
	@scripts/ensure-packages $(DEB_PACKAGES)
	mkdir -p $(DEB_DIR)
	rm -f $(DEB_DIR)/ifmeter_* $(DEB_DIR)/ifmeter-dbgsym_*
	SWIFT=$(SWIFT) DEB_DIR=$(DEB_DIR) dpkg-buildpackage --build=binary --no-sign \
	  --buildinfo-option=-u$(DEB_DIR) --buildinfo-file=$(DEB_DIR)/ifmeter_$(DEB_VERSION)_$(DEB_ARCH).buildinfo \
	  --changes-option=-u$(DEB_DIR) --changes-file=$(DEB_DIR)/ifmeter_$(DEB_VERSION)_$(DEB_ARCH).changes
	debian/rules clean
	@echo "Built $(DEB_FILE)"

# lintian on it: any error or warning fails. There are no overrides; what
# it says at info level (no BIND_NOW, no _FORTIFY_SOURCE functions, no
# init.d script, "misspellings" in the Swift runtime's strings) is shown.
deb-lint: deb
	lintian --fail-on error,warning --display-info $(DEB_FILE)

# Removes what install put: ifmeter's files (every page is ifmeter.1 or
# ifmeter-COMMAND.1) and, in a DESTDIR staging tree only, the folders left
# empty (never the system's own).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ifmeter
	rm -f $(DESTDIR)$(MANDIR)/man1/ifmeter.1 $(DESTDIR)$(MANDIR)/man1/ifmeter-*.1
	rm -f $(DESTDIR)$(BASHCOMPLETIONDIR)/ifmeter
	rm -f $(DESTDIR)$(ZSHCOMPLETIONDIR)/_ifmeter
	rm -f $(DESTDIR)$(FISHCOMPLETIONDIR)/ifmeter.fish
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/ifmeter-serve.service
	rm -f $(DESTDIR)$(DATADIR)/prometheus/ifmeter-rules.yml $(DESTDIR)$(DATADIR)/prometheus/ifmeter-rules-test.yml
	rm -f $(DESTDIR)$(DATADIR)/grafana/ifmeter.json $(DESTDIR)$(DATADIR)/alerts.md
	rmdir $(DESTDIR)$(DATADIR)/prometheus $(DESTDIR)$(DATADIR)/grafana $(DESTDIR)$(DATADIR) 2>/dev/null || true
	# The config file goes only as it was shipped: an edited one is kept.
	if [ -x $(INSTALL_BINARY) ] && $(INSTALL_BINARY) --generate-config | cmp -s - $(DESTDIR)$(SYSCONFDIR)/ifmeter/ifmeter.yml; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/ifmeter/ifmeter.yml; fi
	@if [ -n "$(DESTDIR)" ]; then \
		for dir in $(INSTALLED_DIRS); do \
			while [ "$$dir" != / ] && [ "$$dir" != . ] && rmdir "$(DESTDIR)$$dir" 2>/dev/null; do dir=$$(dirname "$$dir"); done; \
		done; \
	fi
