# src/store/ch_*.c: the ClickHouse backend. `make bench-scaleout`
# (bench/bench-scaleout.sh) ingests the bench-server fleet into the embedded
# store and, through two store instances (two stateless servers), into a
# ClickHouse it starts itself; figures only.
bench-scaleout: $(OUT)/bench/bench_store $(OUT)/bench/stream_loadgen $(OUT)/bin/kiln
