# src/query: the benchmark driver for `make bench-query` (bench/bench-query.sh).
$(OUT)/bench/bench_query: bench/bench_query.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

# The regression report's 24 h store (bench/bench_query_regress.c).
$(OUT)/bench/bench_query_regress: bench/bench_query_regress.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-query: $(OUT)/bench/bench_query $(OUT)/bench/bench_query_regress

# libFuzzer objects get header dependencies like the other builds (the main
# rule has no -MMD): without them a changed header (query_internal.h's tree
# layout, pprof's internals) leaves stale fuzz objects that crash or fail to
# link. Harmless to every other module; belongs in the Makefile proper.
FUZZ_OBJ_CFLAGS += -MMD -MP
-include $(shell find build/fuzz/obj -name '*.d' 2>/dev/null)
# The fuzz programs themselves (fuzz/fuzz_X.c compiled and linked in one step)
# include headers too: build/fuzz/fuzz_X.d lists them. tests/run.sh and
# `make fuzz` skip names with a dot, so the .d files are never run.
FUZZ_CFLAGS += -MMD -MP -MF $@.d -MT $@
-include $(wildcard build/fuzz/fuzz_*.d)
