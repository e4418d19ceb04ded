# src/store: the benchmark driver for `make bench-server` (bench/bench-server.sh).
$(OUT)/bench/bench_store: bench/bench_store.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-server: $(OUT)/bench/bench_store

# The store's share of a symbolization pass (bench/bench_sympass.c); run by hand.
$(OUT)/bench/bench_sympass: bench/bench_sympass.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/store -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

# Simulated agents over real connections, stream protocol next to WriteRaw
# (bench/bench-stream.sh, run by bench-server.sh).
$(OUT)/bench/stream_loadgen: bench/stream_loadgen.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-server: $(OUT)/bench/stream_loadgen
