# scrape: the manager test driver (integration tests and bench-scrape run it).
# It is built with the unit tests (`make test` builds every test_* program).
$(OUT)/tests/scrape/test_config: $(OUT)/tests/scrape/scrape_driver

bench-scrape: build/tests/scrape/scrape_driver build/bin/kiln
