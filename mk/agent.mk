# kiln-agent's link (see docs/PERFORMANCE.md, agent: start-up). Each shared
# library costs the dynamic loader relocations and page faults at every
# start: the agent links its small libraries statically, and reaches
# libcurl and libmicrohttpd (~30 shared objects behind them: gnutls,
# OpenSSL, Kerberos, ...) through stubs that open them on first use
# (src/agent/lazy/lazylibs.c, not part of libkiln.a). A new library call in
# an agent object shows up as a link error here: add it to the list or to
# the stubs. The other binaries link as before. libisal (the stream
# protocol reads the agent's own pprofs back, src/agent/sink_stream.c) has no
# static archive in Debian: linked shared.
AGENT_LAZY_OBJS := $(OUT)/obj/agent/lazy/lazylibs.o
$(BIN)/kiln-agent: $(AGENT_LAZY_OBJS)
$(BIN)/kiln-agent: LDLIBS := -Wl,-Bstatic -lbpf -ldw -lelf -lprotobuf-c -ldeflate -lxxhash \
	-lzstd -llzma -lbz2 -lz -Wl,-Bdynamic -lisal -liberty -ldl -lpthread -lm
