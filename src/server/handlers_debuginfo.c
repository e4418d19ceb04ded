/*
 * handlers_debuginfo.c — debuginfo upload (Parca's DebuginfoService), the
 * debuginfo listing, and server-side symbolization.
 *
 * The "debuginfo" extension (routes.c) owns a debuginfo store under
 * <storage-path>/debuginfo (symbols/debuginfo.h: uploads, the operator's
 * --symbols-local-dir directories, --debuginfod-upstream-servers), a
 * symbolizer over it, and a background thread that symbolizes the store's
 * pending locations (store_symbolize_pending) every second — off the ingest
 * path: WriteRaw never waits for symbols.
 *
 * Files are found by build ID only (symbolizer_config.by_build_id_only): a
 * mapping's file name comes from a client and is never opened, only shown.
 * Opening a client-named path would hand the server's own files' symbols to
 * anyone (the server's binary, by its path), and a FIFO would block the
 * symbolizer; a debuginfod fetch runs on the store's thread with a deadline
 * and never inside a query.
 *
 * The store's background pass calls server_symbolize_resolve_batch
 * (installed in store_options by server.c) with one object's pending
 * addresses, each with its mapping (one libc mapped by many processes comes
 * in one call), and they are resolved in one symbolizer_resolve_batch call;
 * a query that needs one location first calls server_symbolize_resolve.
 * Each address is normalized through its mapping's executable_info when the
 * agent sent it (ELF type and load segment, stored with the mapping), else
 * through the object's program headers, then resolved to frames (inlined
 * first), and an address in no known function becomes one frame named
 * "[binary] +0xADDR" so it never vanishes. A missing file is a
 * transient failure (-ENOENT/-EAGAIN): the store retries later, so debuginfo
 * uploaded or fetched afterwards is used. So is an answer from a stripped
 * binary (only .dynsym): it is shown (server_symbolize_unresolved, at query
 * time) but not stored, so that debuginfo arriving later still counts.
 *
 * Upload protocol: ShouldInitiateUpload -> InitiateUpload (an upload ID,
 * strategy gRPC) -> Upload (client-streaming: UploadInfo, then chunks; the
 * whole stream is bounded by --grpc-max-message-size) -> MarkUploadFinished.
 * Each upload is validated (ELF, matching GNU build ID, size limit) before it
 * is stored content-addressed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "parca/debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "server/handlers.h"
#include "server/internal.h"
#include "store/store.h"
#include "symbols/debuginfo.h"
#include "symbols/symbols.h"

#define MAX_PENDING_UPLOADS 256

struct pending_upload {
	char id[33];
	char build_id[SYMBOLS_BUILD_ID_MAX + 1];
};

struct debuginfo_state {
	struct server *srv;
	struct debuginfo_store *store;
	struct symbolizer *symbolizer;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	struct pending_upload uploads[MAX_PENDING_UPLOADS];
	size_t next_upload;
};

static struct debuginfo_state *state_of(struct server *s)
{
	return server_extension_state(s, "debuginfo");
}

/* --- symbolization ------------------------------------------------------- */

/* Normalizes through the mapping's executable_info when the agent sent it
 * (no file needed); false: not sent or not usable, use the ELF headers. */
static bool normalize_exec(const struct store_mapping_info *m, uint64_t address, uint64_t *vaddr)
{
	return m->exec.elf_type &&
	       symbols_normalize_exec(m->exec.elf_type, m->exec.load_offset, m->exec.load_vaddr,
				      address, m->memory_start, m->memory_limit, m->file_offset,
				      vaddr) == 0;
}

/* The store's lines for the symbolizer's answer loc at vaddr of the object
 * shown as display: its frames, or one frame named "[binary] +0xVADDR" (in
 * label) for an address in no known function. -EAGAIN when only a stripped
 * binary was at hand: not final (debuginfo uploaded or fetched later must
 * still be used); queries show its .dynsym name meanwhile
 * (server_symbolize_unresolved). */
static int location_lines(const struct symbols_location *loc, const char *display, uint64_t vaddr,
			  char *label, size_t label_size, struct store_line_out *lines,
			  size_t max_lines, size_t *n_lines)
{
	*n_lines = 0;
	if (loc->stripped)
		return -EAGAIN;
	if (loc->nframes == 0) {
		symbols_format_unresolved(label, label_size, display, vaddr);
		lines[0] = (struct store_line_out){.function_name = label};
		*n_lines = max_lines ? 1 : 0;
		return 0;
	}
	for (size_t i = 0; i < loc->nframes && i < max_lines; i++) {
		const struct symbols_frame *f = &loc->frames[i];

		lines[i] = (struct store_line_out){.function_name = f->function,
						   .system_name = f->system_name,
						   .filename = f->file,
						   .line = f->line};
		*n_lines = i + 1;
	}
	return 0;
}

/* The address the symbolizer speaks for address in mapping m: normalized
 * through executable_info, else as symbolizer_normalize_mapping says (the
 * object's program headers; mappings with no addresses carry file-relative
 * ones). 0 or a negative errno. */
static int normalize(struct debuginfo_state *st, const struct symbols_object *obj,
		     const struct store_mapping_info *m, uint64_t address, uint64_t *vaddr)
{
	if (m->memory_limit > m->memory_start && normalize_exec(m, address, vaddr))
		return 0;
	return symbolizer_normalize_mapping(st->symbolizer, obj, address, m->memory_start,
					    m->memory_limit, m->file_offset, vaddr, NULL);
}

static const char *display_name(const struct store_mapping_info *m)
{
	return m->filename[0] ? m->filename : m->build_id;
}

int server_symbolize_resolve(void *ctx, const struct store_mapping_info *m, uint64_t address,
			     struct store_line_out *lines, size_t max_lines, size_t *n_lines)
{
	struct debuginfo_state *st = state_of(ctx);
	struct symbols_object obj = {m->build_id, m->filename};
	struct symbols_location loc;
	/* The store copies the strings before this is called again. */
	static __thread char label[512];
	uint64_t vaddr;
	int rc;

	*n_lines = 0;
	if (!st)
		return -EAGAIN; /* not started yet */
	rc = normalize(st, &obj, m, address, &vaddr);
	rc = rc ?: symbolizer_resolve(st->symbolizer, &obj, vaddr, &loc, NULL);
	if (rc < 0)
		return rc;
	return location_lines(&loc, display_name(m), vaddr, label, sizeof(label), lines, max_lines,
			      n_lines);
}

/* One server_symbolize_resolve_batch call, as its symbols_emit_fn sees it:
 * the symbolizer's i-th address is vaddrs[i], the store's item item_of[i]. */
struct resolve_batch {
	const uint64_t *vaddrs;
	const size_t *item_of;
	const char *display;
	store_symbolize_emit_fn emit;
	void *ectx;
};

/* symbols_emit_fn: hands one answer to the store, as
 * server_symbolize_resolve would give it. Runs under the symbolizer's lock;
 * the store's emit takes no lock and copies the strings, so the label can
 * live on this stack. */
static void resolve_batch_emit(void *ctx, size_t i, const struct symbols_location *loc)
{
	const struct resolve_batch *b = ctx;
	struct store_line_out lines[SYMBOLS_MAX_FRAMES];
	char label[512];
	size_t n;
	int rc = location_lines(loc, b->display, b->vaddrs[i], label, sizeof(label), lines,
				SYMBOLS_MAX_FRAMES, &n);

	b->emit(b->ectx, b->item_of[i], rc, lines, n);
}

int server_symbolize_resolve_batch(void *ctx, const struct store_symbolize_item *items, size_t n,
				   store_symbolize_emit_fn emit, void *ectx)
{
	struct debuginfo_state *st = state_of(ctx);
	struct symbols_object obj;
	struct resolve_batch b = {.emit = emit, .ectx = ectx};
	uint64_t *vaddrs = NULL;
	size_t *item_of = NULL, k = 0;
	int rc = 0;

	if (!st)
		return -EAGAIN; /* not started yet */
	if (n == 0)
		return 0;
	/* Every item is of one object (store.h), mapped by one process or
	 * many: normalized per item, resolved in one call. */
	obj = (struct symbols_object){items[0].mapping->build_id, items[0].mapping->filename};
	b.display = display_name(items[0].mapping);
	vaddrs = malloc(n * sizeof(*vaddrs));
	item_of = malloc(n * sizeof(*item_of));
	if (!vaddrs || !item_of) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		/* A failure here is the object's (its file cannot be had),
		 * which symbolizer_resolve would report for every address. */
		rc = normalize(st, &obj, items[i].mapping, items[i].address, &vaddrs[k]);
		if (rc < 0)
			goto out;
		item_of[k++] = i;
	}
	b.vaddrs = vaddrs;
	b.item_of = item_of;
	rc =
	    symbolizer_resolve_batch(st->symbolizer, &obj, vaddrs, k, resolve_batch_emit, &b, NULL);
out:
	free(vaddrs);
	free(item_of);
	return rc;
}

/* "[binary] +0xOFFSET" for a location whose debuginfo is not (yet) at
 * hand: the offset is the file-relative address when the object's headers
 * are known, else the offset into the file the mapping says. */
void server_symbolize_unresolved(void *ctx, const struct store_mapping_info *m, uint64_t address,
				 char *name, size_t size)
{
	struct debuginfo_state *st = state_of(ctx);
	struct symbols_object obj = {m->build_id, m->filename};
	struct symbols_location loc;
	uint64_t vaddr = address;
	bool normalized = m->memory_limit <= m->memory_start;

	if (!normalized && address >= m->memory_start && address < m->memory_limit)
		normalized = normalize_exec(m, address, &vaddr);
	if (!normalized && address >= m->memory_start && address < m->memory_limit) {
		normalized =
		    st && symbolizer_normalize(st->symbolizer, &obj, address, m->memory_start,
					       m->memory_limit, m->file_offset, &vaddr, NULL) == 0;
		if (!normalized)
			vaddr = address - m->memory_start + m->file_offset;
	}
	/* A stripped binary's .dynsym may still name it. */
	if (st && normalized && symbolizer_resolve(st->symbolizer, &obj, vaddr, &loc, NULL) == 0 &&
	    loc.nframes > 0 && loc.frames[0].function) {
		snprintf(name, size, "%s", loc.frames[0].function);
		return;
	}
	symbols_format_unresolved(name, size, m->filename[0] ? m->filename : m->build_id, vaddr);
}

/* New debuginfo for build_id is about to be stored: the request to redo the
 * object's answers is made durable first (see store_resymbolize_note). */
static int debuginfo_arriving(void *arg, const char *build_id, struct kiln_error *err)
{
	struct debuginfo_state *st = arg;

	return store_resymbolize_note(server_store(st->srv), build_id, err);
}

/* New debuginfo for build_id (uploaded, or fetched by the store's thread):
 * the symbolizer opens it afresh, and stored answers for the object's
 * locations, which may come from a poorer source, are redone. */
static void debuginfo_arrived(void *arg, const char *build_id)
{
	struct debuginfo_state *st = arg;
	int n;

	if (st->symbolizer)
		symbolizer_forget(st->symbolizer, build_id);
	n = store_resymbolize(server_store(st->srv), build_id);
	if (n > 0)
		log_info("debuginfo: %s arrived; symbolizing %d locations again", build_id, n);
	pthread_mutex_lock(&st->lock);
	pthread_cond_signal(&st->wake);
	pthread_mutex_unlock(&st->lock);
}

static void *symbolize_loop(void *arg)
{
	struct debuginfo_state *st = arg;

	pthread_mutex_lock(&st->lock);
	while (!st->stop) {
		struct timespec until;

		pthread_mutex_unlock(&st->lock);
		struct kiln_error err = {0};
		symbolizer_recheck(st->symbolizer);
		int n = store_symbolize_pending(server_store(st->srv), 10000, &err);
		if (n < 0)
			log_warn("symbolize: %s", err.msg);
		else if (n > 0)
			log_debug("symbolize: %d locations", n);
		pthread_mutex_lock(&st->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += n > 0 ? 0 : 1;
		if (!st->stop)
			pthread_cond_timedwait(&st->wake, &st->lock, &until);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

int ext_debuginfo_start(struct server *s, const char *config_path, void **state,
			struct kiln_error *err)
{
	const struct server_config *c = server_config(s);
	struct debuginfo_state *st = calloc(1, sizeof(*st));

	if (!st)
		return kiln_error_set(err, ENOMEM, "out of memory");
	st->srv = s;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->wake, NULL);
	struct debuginfo_config dc = {
	    .storage_path = c->storage_path,
	    .upstreams = c->debuginfod_upstreams,
	    .http_timeout_seconds = c->debuginfod_timeout_s,
	    .max_upload_bytes = c->grpc_max_msg_bytes,
	    .negative_ttl_seconds = c->debuginfod_negative_ttl_s,
	    .local_dirs = c->symbols_local_dirs,
	    /* The server's own binary: its self-profile (kiln.yaml scrapes
	     * it) names its functions. Its path is the server's to know,
	     * never a client's. */
	    .own_files = (const char *const[]){"/proc/self/exe", NULL},
	    .on_fetched = debuginfo_arrived,
	    .on_fetched_arg = st,
	    .before_adopt = debuginfo_arriving,
	};
	st->store = debuginfo_store_new(&dc, err);
	if (!st->store)
		goto fail;
	/* A stripped object is looked up again as soon as the negative cache
	 * may have expired (at most every 10 s). */
	st->symbolizer = symbolizer_new(&(struct symbolizer_config){
	    .debuginfo = st->store,
	    .by_build_id_only = true,
	    .recheck_seconds =
		c->debuginfod_negative_ttl_s < 10 ? c->debuginfod_negative_ttl_s : 10});
	if (!st->symbolizer) {
		kiln_error_set(err, ENOMEM, "out of memory for the symbolizer");
		goto fail;
	}
	*state = st;
	if (pthread_create(&st->thread, NULL, symbolize_loop, st) != 0) {
		*state = NULL;
		kiln_error_set(err, EAGAIN, "cannot start the symbolizer thread");
		goto fail;
	}
	st->thread_started = true;
	return 0;
fail:
	ext_debuginfo_stop(st);
	return err && err->code ? err->code : -ENOMEM;
}

void ext_debuginfo_stop(void *state)
{
	struct debuginfo_state *st = state;

	if (!st)
		return;
	if (st->thread_started) {
		pthread_mutex_lock(&st->lock);
		st->stop = true;
		pthread_cond_signal(&st->wake);
		pthread_mutex_unlock(&st->lock);
		pthread_join(st->thread, NULL);
	}
	/* The store's fetch thread calls debuginfo_arrived: stop it first. */
	debuginfo_store_free(st->store);
	symbolizer_free(st->symbolizer);
	pthread_cond_destroy(&st->wake);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* --- DebuginfoService ------------------------------------------------------ */

static void pack_into(struct grpc_call *c, const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);

	if (buf_reserve(&c->resp, len) < 0) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	protobuf_c_message_pack(m, c->resp.data + c->resp.len);
	c->resp.len += len;
}

static struct debuginfo_state *state_or_fail(struct grpc_call *c)
{
	struct debuginfo_state *st = state_of(c->srv);

	if (!st)
		grpc_fail(c, GRPC_STATUS_UNAVAILABLE, "debuginfo store not started");
	return st;
}

void rpc_debuginfo_should_initiate(struct grpc_call *c)
{
	struct debuginfo_state *st = state_or_fail(c);
	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadRequest *req;
	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadResponse resp =
	    PARCA__DEBUGINFO__V1ALPHA1__SHOULD_INITIATE_UPLOAD_RESPONSE__INIT;

	if (!st)
		return;
	req = parca__debuginfo__v1alpha1__should_initiate_upload_request__unpack(NULL, c->req_len,
										 c->req);
	if (!req) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed ShouldInitiateUploadRequest");
		return;
	}
	if (!symbols_build_id_valid(req->build_id)) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT,
			  "invalid build_id \"%.80s\": want 2..64 hex digits", req->build_id);
	} else {
		bool have = debuginfo_store_has(st->store, req->build_id);

		resp.should_initiate_upload = !have || req->force;
		resp.reason = have ? (req->force ? "debuginfo exists; upload forced"
						 : "debuginfo already exists")
				   : "debuginfo not found";
		pack_into(c, &resp.base);
	}
	parca__debuginfo__v1alpha1__should_initiate_upload_request__free_unpacked(req, NULL);
}

void rpc_debuginfo_initiate(struct grpc_call *c)
{
	struct debuginfo_state *st = state_or_fail(c);
	Parca__Debuginfo__V1alpha1__InitiateUploadRequest *req;
	Parca__Debuginfo__V1alpha1__InitiateUploadResponse resp =
	    PARCA__DEBUGINFO__V1ALPHA1__INITIATE_UPLOAD_RESPONSE__INIT;
	Parca__Debuginfo__V1alpha1__UploadInstructions ins =
	    PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__INIT;
	struct pending_upload *u;
	uint8_t rnd[16];

	if (!st)
		return;
	req = parca__debuginfo__v1alpha1__initiate_upload_request__unpack(NULL, c->req_len, c->req);
	if (!req) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed InitiateUploadRequest");
		return;
	}
	if (!symbols_build_id_valid(req->build_id)) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "invalid build_id \"%.80s\"",
			  req->build_id);
		goto out;
	}
	if (req->size < 0 || (uint64_t)req->size > debuginfo_store_max_upload(st->store)) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED,
			  "debuginfo of %lld bytes exceeds the limit of %zu bytes",
			  (long long)req->size, debuginfo_store_max_upload(st->store));
		goto out;
	}
	if (debuginfo_store_has(st->store, req->build_id) && !req->force) {
		grpc_fail(c, 6 /* ALREADY_EXISTS */, "debuginfo for %s already exists",
			  req->build_id);
		goto out;
	}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		grpc_fail(c, GRPC_STATUS_INTERNAL, "no randomness for an upload ID");
		goto out;
	}
	pthread_mutex_lock(&st->lock);
	u = &st->uploads[st->next_upload++ % MAX_PENDING_UPLOADS];
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(u->id + 2 * i, 3, "%02x", rnd[i]);
	snprintf(u->build_id, sizeof(u->build_id), "%s", req->build_id);
	ins.build_id = u->build_id;
	ins.upload_id = u->id;
	ins.upload_strategy =
	    PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__UPLOAD_STRATEGY__UPLOAD_STRATEGY_GRPC;
	resp.upload_instructions = &ins;
	pack_into(c, &resp.base);
	pthread_mutex_unlock(&st->lock);
out:
	parca__debuginfo__v1alpha1__initiate_upload_request__free_unpacked(req, NULL);
}

/* Whether upload_id was handed out for build_id (and, if forget, drops it). */
static bool upload_known(struct debuginfo_state *st, const char *build_id, const char *upload_id,
			 bool forget)
{
	bool found = false;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < MAX_PENDING_UPLOADS && !found; i++) {
		struct pending_upload *u = &st->uploads[i];

		if (u->id[0] && strcmp(u->id, upload_id) == 0 &&
		    strcasecmp(u->build_id, build_id) == 0) {
			found = true;
			if (forget)
				u->id[0] = '\0';
		}
	}
	pthread_mutex_unlock(&st->lock);
	return found;
}

/* Client-streaming: c->req holds every framed message of the stream. */
void rpc_debuginfo_upload(struct grpc_call *c)
{
	struct debuginfo_state *st = state_or_fail(c);
	Parca__Debuginfo__V1alpha1__UploadResponse resp =
	    PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_RESPONSE__INIT;
	char build_id[SYMBOLS_BUILD_ID_MAX + 1] = "";
	struct buf data = {0};
	size_t off = 0;
	bool have_info = false;
	struct kiln_error err = {0};

	if (!st)
		return;
	while (off < c->req_len) {
		const uint8_t *p = c->req + off;
		size_t left = c->req_len - off, mlen;
		Parca__Debuginfo__V1alpha1__UploadRequest *m;

		if (left < 5 || p[0] != 0) {
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT,
				  "malformed or compressed message in the Upload stream");
			goto out;
		}
		mlen = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
		if (mlen > left - 5) {
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT,
				  "truncated message in the Upload stream");
			goto out;
		}
		off += 5 + mlen;
		m = parca__debuginfo__v1alpha1__upload_request__unpack(NULL, mlen, p + 5);
		if (!m) {
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed UploadRequest");
			goto out;
		}
		if (m->data_case == PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_INFO &&
		    !have_info && m->info) {
			bool ok = symbols_build_id_valid(m->info->build_id) &&
				  upload_known(st, m->info->build_id, m->info->upload_id, false);

			if (ok)
				snprintf(build_id, sizeof(build_id), "%s", m->info->build_id);
			parca__debuginfo__v1alpha1__upload_request__free_unpacked(m, NULL);
			if (!ok) {
				grpc_fail(
				    c, GRPC_STATUS_FAILED_PRECONDITION,
				    "unknown upload: call InitiateUpload for this build_id first");
				goto out;
			}
			have_info = true;
			continue;
		}
		if (m->data_case != PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_CHUNK_DATA ||
		    !have_info) {
			parca__debuginfo__v1alpha1__upload_request__free_unpacked(m, NULL);
			grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT,
				  "the Upload stream must be one UploadInfo, then chunk_data");
			goto out;
		}
		int rc = buf_append(&data, m->chunk_data.data, m->chunk_data.len);
		parca__debuginfo__v1alpha1__upload_request__free_unpacked(m, NULL);
		if (rc < 0) {
			grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
			goto out;
		}
	}
	if (!have_info) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "empty Upload stream");
		goto out;
	}
	int rc = debuginfo_store_put(st->store, build_id,
				     data.data ? data.data : (const uint8_t *)"", data.len, &err);
	if (rc < 0) {
		grpc_fail(c,
			  rc == -EINVAL	 ? GRPC_STATUS_INVALID_ARGUMENT
			  : rc == -EFBIG ? GRPC_STATUS_RESOURCE_EXHAUSTED
					 : GRPC_STATUS_INTERNAL,
			  "%s", err.msg);
		goto out;
	}
	debuginfo_arrived(st, build_id);
	log_info("debuginfo: stored %s (%zu bytes)", build_id, data.len);
	resp.build_id = build_id;
	resp.size = data.len;
	pack_into(c, &resp.base);
out:
	buf_free(&data);
}

void rpc_debuginfo_mark_finished(struct grpc_call *c)
{
	struct debuginfo_state *st = state_or_fail(c);
	Parca__Debuginfo__V1alpha1__MarkUploadFinishedRequest *req;
	Parca__Debuginfo__V1alpha1__MarkUploadFinishedResponse resp =
	    PARCA__DEBUGINFO__V1ALPHA1__MARK_UPLOAD_FINISHED_RESPONSE__INIT;

	if (!st)
		return;
	req = parca__debuginfo__v1alpha1__mark_upload_finished_request__unpack(NULL, c->req_len,
									       c->req);
	if (!req) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed MarkUploadFinishedRequest");
		return;
	}
	if (!upload_known(st, req->build_id, req->upload_id, true))
		grpc_fail(c, GRPC_STATUS_NOT_FOUND, "no upload %.40s for build_id %.80s",
			  req->upload_id, req->build_id);
	else if (!debuginfo_store_has(st->store, req->build_id))
		grpc_fail(c, GRPC_STATUS_FAILED_PRECONDITION, "upload %s finished without data",
			  req->upload_id);
	else
		pack_into(c, &resp.base);
	parca__debuginfo__v1alpha1__mark_upload_finished_request__free_unpacked(req, NULL);
}

/* --- GET /api/v1/debuginfo ------------------------------------------------- */

static void list_one(void *arg, const char *build_id, uint64_t size, time_t mtime)
{
	struct json_writer *w = arg;

	json_begin_object(w);
	json_key(w, "build_id");
	json_string(w, build_id);
	json_key(w, "size");
	json_uint(w, size);
	json_key(w, "uploaded_at");
	json_int(w, (int64_t)mtime * 1000);
	json_end_object(w);
}

void http_debuginfo_list(const struct http_request *req, struct http_response *resp)
{
	struct debuginfo_state *st = state_of(req->srv);
	struct json_writer w;

	if (!st) {
		http_error(resp, 503, -1, "debuginfo store not started");
		return;
	}
	json_writer_init(&w, &resp->body);
	json_begin_object(&w);
	json_key(&w, "debuginfo");
	json_begin_array(&w);
	debuginfo_store_list(st->store, list_one, &w);
	json_end_array(&w);
	json_end_object(&w);
	if (json_writer_error(&w) < 0) {
		http_error(resp, 500, -1, "out of memory");
		return;
	}
	resp->status = 200;
	resp->content_type = "application/json";
}

void http_debuginfo_delete(const struct http_request *req, struct http_response *resp)
{
	struct debuginfo_state *st = state_of(req->srv);
	const char *id = req->path + strlen("/api/v1/debuginfo/");
	struct kiln_error err = {0};
	int rc;

	if (!st) {
		http_error(resp, 503, -1, "debuginfo store not started");
		return;
	}
	rc = debuginfo_store_delete(st->store, id, &err);
	if (rc < 0) {
		http_error(resp, http_status_from_errno(rc), -1, "%s", err.msg);
		return;
	}
	log_info("debuginfo: deleted %s", id);
	resp->status = 200;
	resp->content_type = "application/json";
	buf_printf(&resp->body, "{\"deleted\":\"%s\"}\n", id);
}
