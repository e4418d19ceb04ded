# src/otlp: OTLP profiles ingest next to WriteRaw, for `make bench-server`.
$(OUT)/bench/bench_otlp: bench/bench_otlp.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-server: $(OUT)/bench/bench_otlp
