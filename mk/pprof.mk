# pprof: the benchmark driver (bench/bench-pprof.sh runs it).
$(BIN)/bench_pprof: bench/bench_pprof.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-pprof: $(BIN)/bench_pprof
