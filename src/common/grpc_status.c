/*
 * grpc_status.c — names of gRPC status codes, for logs and error messages.
 */
#include "common/grpc_status.h"

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *grpc_status_name(int code)
{
	if (code < 0 || code >= (int)(sizeof(code_names) / sizeof(code_names[0])))
		return "UNKNOWN";
	return code_names[code];
}
