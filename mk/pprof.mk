# pprof: the benchmark driver (bench/bench-pprof.sh runs it).
$(BIN)/bench_pprof: bench/bench_pprof.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-pprof: $(BIN)/bench_pprof

# The Node.js peer of the pprof tests (pprof-format, an independent decoder),
# pinned by tests/peers/node/package-lock.json; installed before the tests
# run so that they need no network. A no-op when already installed.
.PHONY: node-peer
node-peer: | deps
	@tests/peers/node/install.sh

test: node-peer
