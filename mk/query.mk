# src/query: the benchmark driver for `make bench-query` (bench/bench-query.sh).
$(OUT)/bench/bench_query: bench/bench_query.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-query: $(OUT)/bench/bench_query
