# The web UI (ui/, TypeScript + Vite) is built into build/ui/, which kiln
# serves (its --ui-path default finds <exe>/../ui and <exe>/../../ui).
#
# npm dependencies are pinned by ui/package-lock.json and installed with
# `npm ci` only when the lockfile changed (stamp in ui/node_modules). npm
# and vite runs are serialized with flock so parallel makes do not race on
# ui/node_modules or build/ui.

UI_SRCS := $(shell find ui/src -type f 2>/dev/null) ui/index.html ui/package.json \
	ui/tsconfig.json ui/vite.config.ts
UI_NPM_STAMP := ui/node_modules/.kiln-npm-ci.stamp
UI_LOCK := build/.ui-npm.lock

$(UI_NPM_STAMP): ui/package-lock.json | deps
	@mkdir -p build
	@flock $(UI_LOCK) sh -c '[ -f $@ ] && [ $@ -nt ui/package-lock.json ] || { \
		echo "npm ci (ui/)"; cd ui && npm ci --no-audit --no-fund --loglevel=error >/dev/null && \
		touch .$(patsubst ui%,%,$@); }'

# The Makefile's bare .SECONDARY lets make skip a missing stamp while
# build/ui is newer than the sources, so a removed ui/node_modules would
# never be reinstalled: a phony prerequisite forces the rebuild then.
UI_NPM_MISSING := $(if $(wildcard $(UI_NPM_STAMP)),,ui-npm-missing)
.PHONY: ui-npm-missing
ui-npm-missing:

build/ui/index.html: $(UI_SRCS) ui/package-lock.json $(UI_NPM_STAMP) $(UI_NPM_MISSING) | deps
	@mkdir -p build
	@echo "vite build -> build/ui"
	@flock $(UI_LOCK) sh -c 'cd ui && node_modules/.bin/tsc --noEmit -p . && \
		node_modules/.bin/vite build --outDir ../build/ui --emptyOutDir --logLevel warn'
	@touch $@

all: build/ui/index.html
test: build/ui/index.html

.PHONY: ui-test
ui-test: build/ui/index.html
	cd ui && node_modules/.bin/vitest run

# `make install [PREFIX=/opt/kiln] [DESTDIR=...]`: the binaries in
# PREFIX/bin and the UI in PREFIX/ui, where kiln finds it by default
# (<exe>/../ui), so one directory serves everything.
PREFIX ?= /opt/kiln
.PHONY: install
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/ui
	install -m 755 build/bin/kiln build/bin/kiln-agent build/bin/kilnctl $(DESTDIR)$(PREFIX)/bin/
	cp -R build/ui/. $(DESTDIR)$(PREFIX)/ui/
