/*
 * reflection.c — gRPC server reflection answers (reflection.h).
 *
 * The embedded FileDescriptorSet is read with the wire reader (pbwire.h)
 * when a request needs it: a handful of files, each scanned for its name,
 * its imports and the symbols it defines. Nothing is cached, so there is
 * no state to guard between the connection threads that call this.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbwire.h"
#include "grpc/reflection/v1alpha/reflection.pb-c.h"
#include "server/reflection.h"
#include "server/server.h"

typedef Grpc__Reflection__V1alpha__ServerReflectionRequest refl_req;
typedef Grpc__Reflection__V1alpha__ServerReflectionResponse refl_resp;

#define MAX_FILES 64

bool reflection_is_path(const char *path)
{
	return strcmp(path, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") ==
		   0 ||
	       strcmp(path, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo") == 0;
}

struct fd_file {
	const uint8_t *p; /* the serialized FileDescriptorProto */
	size_t len;
	const uint8_t *name, *package;
	size_t name_len, package_len;
};

/* Splits the set into its files; returns how many (at most MAX_FILES). */
static size_t list_files(struct fd_file *files)
{
	size_t len, n = 0;
	const uint8_t *p = reflection_descriptor_set(&len), *end = p + len;
	struct pbwire_field f;
	while (n < MAX_FILES && pbwire_next(&p, end, &f)) {
		if (f.number != 1 || !f.has_bytes)
			continue;
		struct fd_file *fi = &files[n++];
		memset(fi, 0, sizeof(*fi));
		fi->p = f.p;
		fi->len = f.len;
		const uint8_t *q = f.p, *qe = f.p + f.len;
		struct pbwire_field g;
		while (pbwire_next(&q, qe, &g)) {
			if (g.number == 1 && g.has_bytes) {
				fi->name = g.p;
				fi->name_len = g.len;
			} else if (g.number == 2 && g.has_bytes) {
				fi->package = g.p;
				fi->package_len = g.len;
			}
		}
	}
	return n;
}

static bool bytes_eq(const uint8_t *p, size_t n, const char *s, size_t sn)
{
	return n == sn && memcmp(p, s, n) == 0;
}

static const struct fd_file *file_named(const struct fd_file *files, size_t n, const char *name,
					size_t name_len)
{
	for (size_t i = 0; i < n; i++)
		if (bytes_eq(files[i].name, files[i].name_len, name, name_len))
			return &files[i];
	return NULL;
}

/* Whether a DescriptorProto or EnumDescriptorProto (msg) under prefix
 * (e.g. "pkg.Outer") defines sym: itself, or for a message, a nested type. */
static bool type_defines(const uint8_t *msg, size_t len, const char *prefix, size_t plen,
			 const char *sym, bool is_message, int depth)
{
	const uint8_t *p = msg, *end = msg + len;
	struct pbwire_field f;
	char full[512];
	size_t flen = 0;
	while (pbwire_next(&p, end, &f)) {
		if (f.number == 1 && f.has_bytes) {
			int w = snprintf(full, sizeof(full), "%.*s%s%.*s", (int)plen, prefix,
					 plen ? "." : "", (int)f.len, (const char *)f.p);
			flen = w > 0 && (size_t)w < sizeof(full) ? (size_t)w : 0;
		}
	}
	if (!flen)
		return false;
	if (strcmp(full, sym) == 0)
		return true;
	/* A field or value named under the type counts as the type's. */
	if (strncmp(sym, full, flen) == 0 && sym[flen] == '.' && !strchr(sym + flen + 1, '.'))
		return true;
	if (!is_message || depth > 32)
		return false;
	p = msg;
	while (pbwire_next(&p, end, &f)) {
		if (!f.has_bytes)
			continue;
		if ((f.number == 3 && type_defines(f.p, f.len, full, flen, sym, true, depth + 1)) ||
		    (f.number == 4 && type_defines(f.p, f.len, full, flen, sym, false, depth + 1)))
			return true;
	}
	return false;
}

/* Whether a file defines sym (a message, enum, service or method). */
static bool file_defines(const struct fd_file *fi, const char *sym)
{
	const uint8_t *p = fi->p, *end = fi->p + fi->len;
	struct pbwire_field f;
	while (pbwire_next(&p, end, &f)) {
		if (!f.has_bytes)
			continue;
		const char *pkg = (const char *)fi->package;
		size_t plen = fi->package_len;
		if ((f.number == 4 && type_defines(f.p, f.len, pkg, plen, sym, true, 0)) ||
		    (f.number == 5 && type_defines(f.p, f.len, pkg, plen, sym, false, 0)) ||
		    (f.number == 6 && type_defines(f.p, f.len, pkg, plen, sym, false, 0)))
			return true;
	}
	return false;
}

/* Adds fi and, transitively, the files it imports to out (no repeats). */
static void add_with_deps(const struct fd_file *files, size_t n, const struct fd_file *fi,
			  const struct fd_file **out, size_t *n_out)
{
	for (size_t i = 0; i < *n_out; i++)
		if (out[i] == fi)
			return;
	if (*n_out >= MAX_FILES)
		return;
	out[(*n_out)++] = fi;
	const uint8_t *p = fi->p, *end = fi->p + fi->len;
	struct pbwire_field f;
	while (pbwire_next(&p, end, &f)) {
		if (f.number != 3 || !f.has_bytes)
			continue;
		const struct fd_file *dep = file_named(files, n, (const char *)f.p, f.len);
		if (dep)
			add_with_deps(files, n, dep, out, n_out);
	}
}

/* The services to list: those with a method in the table (the reflection
 * services among them), in its order. */
static size_t served_services(char names[][128], size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < server_n_grpc_methods && n < max; i++) {
		const char *path = server_grpc_methods[i].path + 1;
		const char *slash = strchr(path, '/');
		if (!slash || (size_t)(slash - path) >= sizeof(names[0]))
			continue;
		char svc[128];
		snprintf(svc, sizeof(svc), "%.*s", (int)(slash - path), path);
		bool seen = false;
		for (size_t k = 0; k < n && !seen; k++)
			seen = strcmp(names[k], svc) == 0;
		if (!seen)
			snprintf(names[n++], sizeof(names[0]), "%s", svc);
	}
	return n;
}

void rpc_reflection_info(struct grpc_call *c)
{
	refl_req *req =
	    grpc__reflection__v1alpha__server_reflection_request__unpack(NULL, c->req_len, c->req);
	refl_resp resp = GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__FileDescriptorResponse fdr =
	    GRPC__REFLECTION__V1ALPHA__FILE_DESCRIPTOR_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ListServiceResponse lsr =
	    GRPC__REFLECTION__V1ALPHA__LIST_SERVICE_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ExtensionNumberResponse enr =
	    GRPC__REFLECTION__V1ALPHA__EXTENSION_NUMBER_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ErrorResponse er =
	    GRPC__REFLECTION__V1ALPHA__ERROR_RESPONSE__INIT;
	Grpc__Reflection__V1alpha__ServiceResponse svc[64], *svcp[64];
	char names[64][128], why[300];
	struct fd_file files[MAX_FILES];
	const struct fd_file *found[MAX_FILES];
	ProtobufCBinaryData blobs[MAX_FILES];
	size_t n_files = 0, n_found = 0;

	if (!req) {
		grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "not a ServerReflectionRequest");
		return;
	}
	resp.valid_host = req->host;
	resp.original_request = req;
	switch (req->message_request_case) {
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES: {
		size_t n = served_services(names, 64);
		for (size_t i = 0; i < n; i++) {
			grpc__reflection__v1alpha__service_response__init(&svc[i]);
			svc[i].name = names[i];
			svcp[i] = &svc[i];
		}
		lsr.n_service = n;
		lsr.service = svcp;
		resp.message_response_case =
		    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
		resp.list_services_response = &lsr;
		break;
	}
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL: {
		bool by_name =
		    req->message_request_case ==
		    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME;
		const char *want = by_name ? req->file_by_filename : req->file_containing_symbol;
		const struct fd_file *hit = NULL;
		n_files = list_files(files);
		if (by_name)
			hit = file_named(files, n_files, want, strlen(want));
		for (size_t i = 0; !by_name && !hit && i < n_files; i++)
			if (file_defines(&files[i], want))
				hit = &files[i];
		if (!hit) {
			snprintf(why, sizeof(why), "%s %.200s not found",
				 by_name ? "file" : "symbol", want);
			er.error_code = GRPC_STATUS_NOT_FOUND;
			er.error_message = why;
			resp.message_response_case =
			    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
			resp.error_response = &er;
			break;
		}
		add_with_deps(files, n_files, hit, found, &n_found);
		for (size_t i = 0; i < n_found; i++) {
			blobs[i].data = (uint8_t *)found[i]->p;
			blobs[i].len = found[i]->len;
		}
		fdr.n_file_descriptor_proto = n_found;
		fdr.file_descriptor_proto = blobs;
		resp.message_response_case =
		    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
		resp.file_descriptor_response = &fdr;
		break;
	}
	case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
		enr.base_type_name = req->all_extension_numbers_of_type;
		resp.message_response_case =
		    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
		resp.all_extension_numbers_response = &enr;
		break;
	default:
		er.error_code = GRPC_STATUS_NOT_FOUND;
		er.error_message = req->message_request_case
				       ? "Kiln's protos declare no extensions"
				       : "the request names nothing to look up";
		resp.message_response_case =
		    GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
		resp.error_response = &er;
		break;
	}
	size_t n = protobuf_c_message_get_packed_size(&resp.base);
	if (buf_reserve(&c->resp, n))
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the answer");
	else
		c->resp.len = protobuf_c_message_pack(&resp.base, c->resp.data);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}
