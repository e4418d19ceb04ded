# src/store: the benchmark driver for `make bench-server` (bench/bench-server.sh).
$(OUT)/bench/bench_store: bench/bench_store.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-server: $(OUT)/bench/bench_store
