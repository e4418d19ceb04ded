# tests/soak: the standing soak and fault campaign, `make soak` (not part of
# `make test`; see docs/RELIABILITY.md). Each part runs alone too.
SOAK_WRAP := write pwrite fsync fdatasync ftruncate rename open malloc calloc realloc

$(OUT)/soak/soak_store: tests/soak/soak_store.c tests/soak/fault_inject.c tests/soak/fault_inject.h \
		tests/store/store_test_util.h $(LIBKILN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -rdynamic -Wno-format-truncation -Itests/store -Itests/soak -o $@ tests/soak/soak_store.c tests/soak/fault_inject.c \
		$(LIBKILN) $(LDFLAGS) $(foreach f,$(SOAK_WRAP),-Wl,--wrap=$(f)) $(LDLIBS)

.PHONY: soak soak-kill soak-diskfull soak-faults soak-fuzz soak-restart

soak-faults: $(OUT)/soak/soak_store
	SOAK_FAULT_BIN=$(CURDIR)/$(OUT)/soak/soak_store tests/soak/soak.sh faults

soak-kill: $(BIN)/kiln
	tests/soak/soak.sh kill

soak-diskfull: $(BIN)/kiln
	tests/soak/soak.sh diskfull

soak-restart: $(BIN)/kiln $(OUT)/soak/soak_store
	SOAK_FAULT_BIN=$(CURDIR)/$(OUT)/soak/soak_store tests/soak/soak.sh restart

soak-fuzz: fuzz-build
	tests/soak/soak.sh fuzz

soak: $(BIN)/kiln $(OUT)/soak/soak_store fuzz-build
	SOAK_FAULT_BIN=$(CURDIR)/$(OUT)/soak/soak_store tests/soak/soak.sh all
