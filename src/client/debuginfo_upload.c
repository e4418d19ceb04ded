/*
 * debuginfo_upload.c — one debug file to a server with Parca's
 * DebuginfoService protocol; shared by `kilnctl debuginfo upload` and the
 * agent's background uploader.
 *
 * Order: ShouldInitiateUpload first (cheap: most build IDs are already on
 * the server, and then nothing is read or extracted), then the file to
 * send is chosen — a local debug file (<debug_dir>/.build-id/xx/yyyy.debug
 * or the .gnu_debuglink target) with the same build ID (already debug-only),
 * else the debug parts extracted from the binary (symbols_extract_debuginfo:
 * .symtab, .debug_*, notes) — then InitiateUpload (size and xxh3 hash),
 * the client-streaming Upload (an UploadInfo, then chunks read from the
 * file one at a time, never the whole file in memory, paced to the
 * bandwidth limit), and MarkUploadFinished.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/clock.h"
#include "client/client.h"
#include "parca/debuginfo/v1alpha1/debuginfo.pb-c.h"
#include "symbols/symbols.h"

#define SVC	      "/parca.debuginfo.v1alpha1.DebuginfoService/"
#define DEFAULT_CHUNK (512 * 1024)

/* One unary call: packs req, unpacks the answer with desc. On failure
 * fills e and r->grpc_code and returns NULL. */
static void *call_unary(struct grpc_client *c, const char *method, const ProtobufCMessage *req,
			const ProtobufCMessageDescriptor *desc, struct debuginfo_upload_result *r,
			struct kiln_error *e)
{
	size_t len = protobuf_c_message_get_packed_size(req);
	uint8_t *packed = malloc(len ? len : 1);
	struct grpc_status st = {0};
	struct buf resp = {0};
	void *out = NULL;

	if (!packed) {
		kiln_error_set(e, ENOMEM, "%s: out of memory", method);
		return NULL;
	}
	protobuf_c_message_pack(req, packed);
	grpc_client_unary(c, method, packed, len, &resp, &st);
	free(packed);
	r->grpc_code = st.code;
	if (st.code != GRPC_STATUS_OK)
		kiln_error_set(e, EIO, "%s: %s: %s", strrchr(method, '/') + 1,
			       grpc_status_name(st.code), st.message);
	else if (!(out = protobuf_c_message_unpack(desc, NULL, resp.len, resp.data))) {
		r->grpc_code = GRPC_STATUS_INTERNAL;
		kiln_error_set(e, EPROTO, "%s: malformed response", strrchr(method, '/') + 1);
	}
	buf_free(&resp);
	return out;
}

/* xxh3-64 of a file, streamed. */
static int hash_file(int fd, char out[17])
{
	XXH3_state_t *st = XXH3_createState();
	uint8_t *chunk = malloc(1 << 16);
	ssize_t n;
	int rc = 0;

	if (!st || !chunk) {
		rc = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	while ((n = read(fd, chunk, 1 << 16)) > 0)
		XXH3_64bits_update(st, chunk, (size_t)n);
	if (n < 0)
		rc = -errno;
	snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits_digest(st));
	lseek(fd, 0, SEEK_SET);
out:
	XXH3_freeState(st);
	free(chunk);
	return rc;
}

struct upload_stream {
	const char *build_id, *upload_id;
	int fd;
	size_t chunk, sent;
	uint64_t rate, start_ns;
	bool info_sent, done;
	uint8_t *buf, *packed;
};

/* Produces the Upload stream: one UploadInfo, then chunks of the file. */
static int next_upload_message(void *arg, const void **msg, size_t *len)
{
	struct upload_stream *u = arg;
	Parca__Debuginfo__V1alpha1__UploadRequest req =
	    PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__INIT;
	Parca__Debuginfo__V1alpha1__UploadInfo info = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INFO__INIT;

	if (!u->info_sent) {
		info.build_id = (char *)u->build_id;
		info.upload_id = (char *)u->upload_id;
		req.data_case = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_INFO;
		req.info = &info;
		u->info_sent = true;
	} else {
		ssize_t n;

		if (u->done)
			return 0;
		/* Pace to the bandwidth limit: wait until the bytes already sent
		 * fit the budget of the time elapsed. */
		if (u->rate) {
			uint64_t due =
			    u->start_ns + (uint64_t)((double)u->sent * 1e9 / (double)u->rate);
			uint64_t now = (uint64_t)mono_ns();

			if (due > now) {
				struct timespec ts = {
				    .tv_sec = (time_t)((due - now) / 1000000000ull),
				    .tv_nsec = (long)((due - now) % 1000000000ull)};
				nanosleep(&ts, NULL);
			}
		}
		n = read(u->fd, u->buf, u->chunk);
		if (n < 0)
			return -errno;
		if (n == 0) {
			u->done = true;
			return 0;
		}
		req.data_case = PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_REQUEST__DATA_CHUNK_DATA;
		req.chunk_data.data = u->buf;
		req.chunk_data.len = (size_t)n;
		u->sent += (size_t)n;
	}
	free(u->packed);
	*len = protobuf_c_message_get_packed_size(&req.base);
	u->packed = malloc(*len ? *len : 1);
	if (!u->packed)
		return -ENOMEM;
	protobuf_c_message_pack(&req.base, u->packed);
	*msg = u->packed;
	return 1;
}

static bool is_debug_file_for(const char *candidate, const char *build_id)
{
	struct elfinfo info;
	struct kiln_error e = {0};

	return access(candidate, R_OK) == 0 && elfinfo_read_file(candidate, &info, &e) == 0 &&
	       strcmp(info.build_id, build_id) == 0;
}

/* A local debug file for the binary at path: where gdb looks, in its
 * order — <debug_dir>/.build-id/xx/yyyy.debug (Debian's dbgsym packages),
 * then the .gnu_debuglink name next to the binary, in its .debug/, and
 * under <debug_dir>/<binary's directory>/. Only a file carrying the same
 * build ID counts. */
static bool local_debug_file(const char *debug_dir, const char *path, const char *build_id,
			     const char *debuglink, char *out, size_t outsz)
{
	char dir[4096];
	const char *slash;

	if (strlen(build_id) < 3)
		return false;
	snprintf(out, outsz, "%s/.build-id/%.2s/%s.debug", debug_dir, build_id, build_id + 2);
	if (is_debug_file_for(out, build_id))
		return true;
	if (!debuglink || !debuglink[0] || strchr(debuglink, '/') || !(slash = strrchr(path, '/')))
		return false;
	if (snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path) >= (int)sizeof(dir))
		return false;
	if (snprintf(out, outsz, "%s/%s", dir, debuglink) < (int)outsz && strcmp(out, path) != 0 &&
	    is_debug_file_for(out, build_id))
		return true;
	if (snprintf(out, outsz, "%s/.debug/%s", dir, debuglink) < (int)outsz &&
	    is_debug_file_for(out, build_id))
		return true;
	return snprintf(out, outsz, "%s%s/%s", debug_dir, dir, debuglink) < (int)outsz &&
	       is_debug_file_for(out, build_id);
}

int debuginfo_upload_file(struct grpc_client *c, const char *path, const char *build_id,
			  const struct debuginfo_upload_opts *o, struct debuginfo_upload_result *r,
			  struct kiln_error *e)
{
	static const struct debuginfo_upload_opts defaults = {0};
	const char *temp_dir, *debug_dir, *send_path = path;
	char tmpdir[4096] = "", extracted[4200] = "", local[4096], hash[17];
	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadResponse *should = NULL;
	Parca__Debuginfo__V1alpha1__InitiateUploadResponse *init = NULL;
	Parca__Debuginfo__V1alpha1__UploadResponse *up = NULL;
	Parca__Debuginfo__V1alpha1__MarkUploadFinishedResponse *fin = NULL;
	struct upload_stream us = {.fd = -1};
	struct grpc_status st = {0};
	struct buf resp = {0};
	struct elfinfo info;
	struct stat sb;
	int rc = -EIO;

	if (!o)
		o = &defaults;
	temp_dir = o->temp_dir ? o->temp_dir : "/tmp";
	debug_dir = o->debug_dir ? o->debug_dir : "/usr/lib/debug";
	memset(r, 0, sizeof(*r));
	if (build_id && build_id[0]) {
		snprintf(r->build_id, sizeof(r->build_id), "%s", build_id);
		/* The caller names the build ID it saw; the file must still be
		 * that one (it may have been replaced since). */
		if ((rc = elfinfo_read_file(path, &info, e)) < 0)
			return rc;
		if (strcmp(info.build_id, build_id) != 0)
			return kiln_error_set(e, ESTALE, "%s: build ID is now \"%s\", not %s", path,
					      info.build_id, build_id);
	} else {
		if ((rc = elfinfo_read_file(path, &info, e)) < 0)
			return rc;
		if (!info.build_id[0])
			return kiln_error_set(e, ENOENT, "%s: no GNU build ID and no .text to hash",
					      path);
		snprintf(r->build_id, sizeof(r->build_id), "%s", info.build_id);
	}
	/* Nothing worth sending: a stripped file whose debug parts would be
	 * empty (.dynsym is not kept by the extract) would only shadow a
	 * better source (debuginfod) on the server. */
	if (o->require_symbols && !info.has_symtab && !info.has_debug_info &&
	    !local_debug_file(debug_dir, path, r->build_id, info.debuglink, local, sizeof(local)))
		return kiln_error_set(e, ENODATA, "%s: no .symtab or .debug_info to upload", path);
	if (!symbols_build_id_valid(r->build_id))
		return kiln_error_set(e, EINVAL, "%s: build ID \"%s\" is not hex", path,
				      r->build_id);
	rc = -EIO; /* every failure below sets e; rc stays negative until done */

	Parca__Debuginfo__V1alpha1__ShouldInitiateUploadRequest sreq =
	    PARCA__DEBUGINFO__V1ALPHA1__SHOULD_INITIATE_UPLOAD_REQUEST__INIT;
	sreq.build_id = r->build_id;
	sreq.force = o->force;
	should = call_unary(
	    c, SVC "ShouldInitiateUpload", &sreq.base,
	    &parca__debuginfo__v1alpha1__should_initiate_upload_response__descriptor, r, e);
	if (!should)
		goto out;
	if (!should->should_initiate_upload) {
		r->outcome = DEBUGINFO_NOT_WANTED;
		snprintf(r->reason, sizeof(r->reason), "%s", should->reason);
		rc = 0;
		goto out;
	}

	/* What to send: a local debug file, else the extract. */
	if (local_debug_file(debug_dir, path, r->build_id, info.debuglink, local, sizeof(local))) {
		send_path = local;
	} else if (o->no_extract) {
		send_path = path;
	} else {
		snprintf(tmpdir, sizeof(tmpdir), "%s/kiln-debuginfo-XXXXXX", temp_dir);
		if (!mkdtemp(tmpdir)) {
			rc = kiln_error_set(e, errno, "%s: mkdtemp: %s", tmpdir, strerror(errno));
			tmpdir[0] = '\0';
			goto out;
		}
		snprintf(extracted, sizeof(extracted), "%s/debuginfo", tmpdir);
		if ((rc = symbols_extract_debuginfo(path, extracted, e)) < 0)
			goto out;
		rc = -EIO;
		send_path = extracted;
	}
	snprintf(r->source, sizeof(r->source), "%s", send_path);
	us.fd = open(send_path, O_RDONLY | O_CLOEXEC);
	if (us.fd < 0 || fstat(us.fd, &sb) != 0) {
		rc = kiln_error_set(e, errno, "%s: %s", send_path, strerror(errno));
		goto out;
	}
	if ((rc = hash_file(us.fd, hash)) < 0) {
		kiln_error_set(e, -rc, "%s: reading: %s", send_path, strerror(-rc));
		goto out;
	}
	rc = -EIO;

	Parca__Debuginfo__V1alpha1__InitiateUploadRequest ireq =
	    PARCA__DEBUGINFO__V1ALPHA1__INITIATE_UPLOAD_REQUEST__INIT;
	ireq.build_id = r->build_id;
	ireq.size = (int64_t)sb.st_size;
	ireq.hash = hash;
	ireq.force = o->force;
	init = call_unary(c, SVC "InitiateUpload", &ireq.base,
			  &parca__debuginfo__v1alpha1__initiate_upload_response__descriptor, r, e);
	if (!init)
		goto out;
	if (!init->upload_instructions ||
	    init->upload_instructions->upload_strategy !=
		PARCA__DEBUGINFO__V1ALPHA1__UPLOAD_INSTRUCTIONS__UPLOAD_STRATEGY__UPLOAD_STRATEGY_GRPC) {
		r->grpc_code = GRPC_STATUS_UNIMPLEMENTED;
		kiln_error_set(e, ENOTSUP, "server asked for an upload strategy other than gRPC");
		goto out;
	}

	us.build_id = r->build_id;
	us.upload_id = init->upload_instructions->upload_id;
	us.chunk = o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
	us.rate = o->max_bytes_per_second;
	us.start_ns = (uint64_t)mono_ns();
	us.buf = malloc(us.chunk);
	if (!us.buf) {
		rc = kiln_error_set(e, ENOMEM, "out of memory");
		goto out;
	}
	grpc_client_stream(c, SVC "Upload", next_upload_message, &us, &resp, &st);
	r->grpc_code = st.code;
	if (st.code != GRPC_STATUS_OK) {
		kiln_error_set(e, EIO, "Upload: %s: %s", grpc_status_name(st.code), st.message);
		goto out;
	}
	up = parca__debuginfo__v1alpha1__upload_response__unpack(NULL, resp.len, resp.data);

	Parca__Debuginfo__V1alpha1__MarkUploadFinishedRequest mreq =
	    PARCA__DEBUGINFO__V1ALPHA1__MARK_UPLOAD_FINISHED_REQUEST__INIT;
	mreq.build_id = r->build_id;
	mreq.upload_id = init->upload_instructions->upload_id;
	fin = call_unary(c, SVC "MarkUploadFinished", &mreq.base,
			 &parca__debuginfo__v1alpha1__mark_upload_finished_response__descriptor, r,
			 e);
	if (!fin)
		goto out;
	r->outcome = DEBUGINFO_UPLOADED;
	r->bytes = up ? up->size : us.sent;
	rc = 0;
out:
	if (should)
		protobuf_c_message_free_unpacked(&should->base, NULL);
	if (init)
		protobuf_c_message_free_unpacked(&init->base, NULL);
	if (up)
		protobuf_c_message_free_unpacked(&up->base, NULL);
	if (fin)
		protobuf_c_message_free_unpacked(&fin->base, NULL);
	if (us.fd >= 0)
		close(us.fd);
	free(us.buf);
	free(us.packed);
	buf_free(&resp);
	if (extracted[0])
		unlink(extracted);
	if (tmpdir[0])
		rmdir(tmpdir);
	return rc;
}
