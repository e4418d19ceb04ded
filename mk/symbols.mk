# symbols: the benchmark driver for `make bench-symbols` (bench/bench-symbols.sh).
$(BIN)/bench_symbols: bench/bench_symbols.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-symbols: $(BIN)/bench_symbols
