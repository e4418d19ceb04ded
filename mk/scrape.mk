# scrape: the manager test driver (integration tests and bench-scrape run it).
# It is built with the unit tests (`make test` builds every test_* program).
$(OUT)/tests/scrape/test_config: $(OUT)/tests/scrape/scrape_driver

# The per-scrape cost of one cumulative profile, on one thread (bench-scrape
# runs it on two allocs profiles of its Go peer).
$(OUT)/bench/bench_scrape_delta: bench/bench_scrape_delta.c $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LIBKILN) $(LDFLAGS) $(LDLIBS)

bench-scrape: build/tests/scrape/scrape_driver build/bin/kiln build/bench/bench_scrape_delta
