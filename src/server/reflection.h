/*
 * reflection.h — gRPC server reflection (grpc.reflection.v1 and v1alpha
 * ServerReflection/ServerReflectionInfo), so that grpcurl-style tools list
 * Kiln's services and describe their messages without the .proto files.
 *
 * The descriptors are those of proto/, made by protoc at build time and
 * embedded (reflection_data.c). Answers: list_services names every service
 * with a method in server_grpc_methods[] (routes.c), these two included;
 * file_by_filename and file_containing_symbol (a message, enum,
 * service or method, fully qualified) send the file and every file it
 * imports, transitively; all_extension_numbers_of_type sends none (Kiln's
 * protos declare no extensions); anything not found is an error_response
 * with NOT_FOUND, in the stream, as the protocol has it.
 *
 * The method is a bidirectional stream: over HTTP/2 (h2.c) each request
 * message is answered as it arrives, until the client ends its side. Over
 * gRPC-Web and Connect (webrpc.h) a body carries one request and gets one
 * answer. Token role: read.
 */
#ifndef KILN_SERVER_REFLECTION_H
#define KILN_SERVER_REFLECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct grpc_call;

/* True for either version's ServerReflectionInfo path. */
bool reflection_is_path(const char *path);

/* Answers one ServerReflectionRequest (c->req) with one
 * ServerReflectionResponse (c->resp); INVALID_ARGUMENT for bytes that are
 * not a request. */
void rpc_reflection_info(struct grpc_call *c);

/* The embedded FileDescriptorSet. */
const uint8_t *reflection_descriptor_set(size_t *len);

#endif
