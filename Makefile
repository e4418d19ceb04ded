# Kiln — top-level build.
#
# Plain make + pkg-config, like libbpf-tools and Redis: one file a newcomer can
# read top to bottom (why not meson: see docs/ARCHITECTURE.md).
#
#   make            release build: build/bin/{kiln,kiln-agent,kilnctl}
#   make run        deps + build + start the main job (see README)
#   make test       deps + ASan/UBSan build + format check + every test
#   make fuzz       long libFuzzer runs (FUZZ_SECONDS=600 per target)
#   make bench      every bench-* target
#
# Layout: every src/<module>/*.c except main.c and *.bpf.c goes into one
# archive, build/lib/libkiln.a; each binary is its main.c linked against it.
# tests/<module>/test_*.c are cmocka programs; tests/integration/*.sh are
# black-box tests driving the real binaries. SAN=1 puts everything under
# build/san/ compiled with AddressSanitizer + UndefinedBehaviorSanitizer.

SHELL := /bin/bash
.DEFAULT_GOAL := all

CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
CLANG ?= clang
BPFTOOL ?= bpftool
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

SAN ?= 0
ifeq ($(SAN),1)
OUT := build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
else
OUT := build
SANFLAGS :=
endif
GEN := build/gen
BIN := $(OUT)/bin

PKGS := libbpf libelf libdw libprotobuf-c libnghttp2 libmicrohttpd libcurl jansson \
	libzstd zlib libdeflate libisal yaml-0.1 libxxhash libpcre2-8 libdebuginfod openssl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wstrict-prototypes
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 $(WARN) -fno-omit-frame-pointer $(SANFLAGS) \
	-D_GNU_SOURCE -Isrc -I$(GEN) $(PKG_CFLAGS)
LDFLAGS += $(SANFLAGS)
LDLIBS += $(PKG_LIBS) -liberty -lpthread -lm

MODULES := common pprof jfr store query symbols unwind scrape client otlp server agent cli

# --- generated code ---------------------------------------------------------
PROTOS := $(shell find proto -name '*.proto' | sort)
PROTO_C := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PROTO_H := $(PROTO_C:.c=.h)
BPF_SRCS := $(wildcard src/agent/*.bpf.c)
BPF_SKELS := $(patsubst src/agent/%.bpf.c,$(GEN)/%.skel.h,$(BPF_SRCS))
GEN_HDRS := $(PROTO_H) $(BPF_SKELS)

# --- version ------------------------------------------------------------------
# `git describe` of this checkout, or "unknown" outside git (a tarball, even
# one unpacked inside another repository). Only version.o is compiled with it:
# $(GEN)/version.txt is rewritten when the version changes, so a new commit
# recompiles that one file and relinks the binaries.
KILN_VERSION := $(shell [ "$$(git -C '$(CURDIR)' rev-parse --show-toplevel 2>/dev/null)" = '$(CURDIR)' ] \
	&& git -C '$(CURDIR)' describe --tags --always --dirty 2>/dev/null || echo unknown)

$(GEN)/version.txt: FORCE
	@mkdir -p $(@D)
	@echo '$(KILN_VERSION)' | cmp -s - $@ || echo '$(KILN_VERSION)' > $@

$(OUT)/obj/common/version.o: $(GEN)/version.txt
$(OUT)/obj/common/version.o: CFLAGS += -DKILN_VERSION='"$(KILN_VERSION)"'

# --- sources ------------------------------------------------------------------
LIB_SRCS := $(filter-out %/main.c %.bpf.c,$(foreach m,$(MODULES),$(wildcard src/$(m)/*.c)))
LIB_OBJS := $(patsubst src/%.c,$(OUT)/obj/%.o,$(LIB_SRCS)) \
	$(patsubst $(GEN)/%.c,$(OUT)/obj/gen/%.o,$(PROTO_C))
LIBKILN := $(OUT)/lib/libkiln.a

BINS := $(BIN)/kiln $(BIN)/kiln-agent $(BIN)/kilnctl
MAIN_server := src/server/main.c
MAIN_agent := src/agent/main.c
MAIN_cli := src/cli/main.c

TEST_SRCS := $(sort $(wildcard tests/*/test_*.c))
TEST_BINS := $(patsubst tests/%.c,$(OUT)/tests/%,$(TEST_SRCS))
TEST_HELPERS := $(wildcard tests/lib/*.c)

FUZZ_SRCS := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))

# Generated sources are kept: they are inputs to other rules, not intermediates.
.SECONDARY:

.PHONY: FORCE all deps run test unit-test integration-test format format-check \
	fuzz fuzz-build bench clean

all: deps $(BINS)

deps:
	@scripts/deps.sh

# --- rules --------------------------------------------------------------------
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(GEN)
	protoc-c --proto_path=proto --c_out=$(GEN) $<

$(GEN)/vmlinux.h:
	@mkdir -p $(GEN)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(GEN)/%.bpf.o: src/agent/%.bpf.c $(wildcard src/agent/*.h) src/unwind/unwind_row.h $(GEN)/vmlinux.h
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(GEN) -Isrc/agent -Isrc \
		-c $< -o $@.tmp
	llvm-strip -g $@.tmp && mv $@.tmp $@

$(GEN)/%.skel.h: $(GEN)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

$(OUT)/obj/gen/%.o: $(GEN)/%.c $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(filter-out -Werror -Wshadow,$(CFLAGS)) -c $< -o $@

$(OUT)/obj/%.o: src/%.c $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBKILN): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BIN)/kiln: $(OUT)/obj/server/main.o $(LIBKILN)
$(BIN)/kiln-agent: $(OUT)/obj/agent/main.o $(LIBKILN)
$(BIN)/kilnctl: $(OUT)/obj/cli/main.o $(LIBKILN)
$(BINS):
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(OUT)/tests/%: tests/%.c $(TEST_HELPERS) $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -o $@ $< $(TEST_HELPERS) $(LIBKILN) $(LDFLAGS) $(LDLIBS) -lcmocka

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)

# --- running ------------------------------------------------------------------
run: all
	scripts/run.sh

# The full suite: sanitized build, format check, unit + integration tests,
# short fuzz runs. The last line is the summary "N passed, N failed".
test: deps
	$(MAKE) --no-print-directory format-check
	$(MAKE) --no-print-directory SAN=1 build/san/bin/kiln build/san/bin/kiln-agent \
		build/san/bin/kilnctl build/san/soak/soak_store \
		$(patsubst tests/%.c,build/san/tests/%,$(TEST_SRCS))
	$(MAKE) --no-print-directory $(BINS) fuzz-build
	KILN_BIN=$(CURDIR)/build/san/bin KILN_TESTBIN=$(CURDIR)/build/san/tests \
		KILN_FUZZBIN=$(CURDIR)/build/fuzz tests/run.sh

format:
	clang-format -i $$(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'fuzz/*.[ch]' 'bench/*.[ch]')

format-check:
	@files=$$(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'fuzz/*.[ch]' 'bench/*.[ch]'); \
	bad=0; for f in $$files; do [ -f "$$f" ] || continue; \
		clang-format --dry-run -Werror "$$f" >/dev/null 2>&1 || { echo "not formatted: $$f (run: make format)"; bad=1; }; \
	done; exit $$bad

# --- fuzzing (clang + libFuzzer, ASan/UBSan) -----------------------------------
FUZZ_BASE := -std=gnu11 -g -O1 -D_GNU_SOURCE -Isrc -I$(GEN) -fno-omit-frame-pointer
FUZZ_CFLAGS = $(FUZZ_BASE) $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined
FUZZ_OBJ_CFLAGS = $(FUZZ_BASE) $(PKG_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LIB_SRCS := $(filter-out src/agent/%,$(LIB_SRCS))
FUZZ_LIB_OBJS := $(patsubst src/%.c,build/fuzz/obj/%.o,$(FUZZ_LIB_SRCS)) \
	$(patsubst $(GEN)/%.c,build/fuzz/obj/gen/%.o,$(PROTO_C))

fuzz-build: $(FUZZ_BINS)

build/fuzz/obj/gen/%.o: $(GEN)/%.c $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_OBJ_CFLAGS) -c $< -o $@

build/fuzz/obj/%.o: src/%.c $(GEN_HDRS)
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_OBJ_CFLAGS) -c $< -o $@

build/fuzz/libkiln-fuzz.a: $(FUZZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

build/fuzz/%: fuzz/%.c build/fuzz/libkiln-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< build/fuzz/libkiln-fuzz.a $(PKG_LIBS) -liberty -lpthread -lm

# The agent is not in the fuzz library (its BPF skeleton); its perf record
# parser is linked alone.
build/fuzz/fuzz_mmap_record: fuzz/fuzz_mmap_record.c build/fuzz/obj/agent/mmapwatch.o \
		build/fuzz/libkiln-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< build/fuzz/obj/agent/mmapwatch.o build/fuzz/libkiln-fuzz.a \
		$(PKG_LIBS) -liberty -lpthread -lm
build/fuzz/fuzz_python_parse: fuzz/fuzz_python_parse.c build/fuzz/obj/agent/python_parse.o \
		build/fuzz/libkiln-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< build/fuzz/obj/agent/python_parse.o \
		build/fuzz/libkiln-fuzz.a $(PKG_LIBS) -liberty -lpthread -lm

# The off-CPU kprobe's kallsyms matcher, likewise.
build/fuzz/fuzz_offcpu_kallsyms: fuzz/fuzz_offcpu_kallsyms.c build/fuzz/obj/agent/offcpu_ksym.o \
		build/fuzz/libkiln-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< build/fuzz/obj/agent/offcpu_ksym.o build/fuzz/libkiln-fuzz.a \
		$(PKG_LIBS) -liberty -lpthread -lm

build/fuzz/fuzz_perfmap: fuzz/fuzz_perfmap.c build/fuzz/obj/agent/perfmap.o \
		build/fuzz/libkiln-fuzz.a
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< build/fuzz/obj/agent/perfmap.o build/fuzz/libkiln-fuzz.a \
		$(PKG_LIBS) -liberty -lpthread -lm

FUZZ_SECONDS ?= 600
fuzz: deps fuzz-build
	@for f in $(FUZZ_BINS); do n=$$(basename $$f); mkdir -p build/fuzz/corpus/$$n build/fuzz/artifacts; \
		echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$$n- build/fuzz/corpus/$$n fuzz/corpus/$$n >build/fuzz/$$n.log 2>&1; \
		rc=$$?; tail -5 build/fuzz/$$n.log; [ $$rc -eq 0 ] || exit 1; \
	done

# --- benchmarks (print figures; never pass/fail on time) ------------------------
# One script per issue: bench/bench-NAME.sh is `make bench-NAME`.
BENCH_SCRIPTS := $(sort $(wildcard bench/bench-*.sh))
BENCH_TARGETS := $(patsubst bench/%.sh,%,$(BENCH_SCRIPTS))
.PHONY: $(BENCH_TARGETS)

bench: $(BENCH_TARGETS)

$(BENCH_TARGETS): bench-%: all
	bench/bench-$*.sh

clean:
	rm -rf build

# Module-specific rules (the UI build, extra tools) live in mk/*.mk so that
# this file stays short and modules do not edit each other's rules.
-include $(sort $(wildcard mk/*.mk))
