/*
 * grpc_status.h — gRPC status codes and their names.
 *
 * The numbers are the wire values of grpc-status (grpc/doc/statuscodes.md),
 * shared by the server, which sends them, and the client, which reads them.
 */
#ifndef KILN_COMMON_GRPC_STATUS_H
#define KILN_COMMON_GRPC_STATUS_H

enum grpc_status_code {
	GRPC_STATUS_OK = 0,
	GRPC_STATUS_CANCELLED = 1,
	GRPC_STATUS_UNKNOWN = 2,
	GRPC_STATUS_INVALID_ARGUMENT = 3,
	GRPC_STATUS_DEADLINE_EXCEEDED = 4,
	GRPC_STATUS_NOT_FOUND = 5,
	GRPC_STATUS_ALREADY_EXISTS = 6,
	GRPC_STATUS_PERMISSION_DENIED = 7,
	GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
	GRPC_STATUS_FAILED_PRECONDITION = 9,
	GRPC_STATUS_ABORTED = 10,
	GRPC_STATUS_OUT_OF_RANGE = 11,
	GRPC_STATUS_UNIMPLEMENTED = 12,
	GRPC_STATUS_INTERNAL = 13,
	GRPC_STATUS_UNAVAILABLE = 14,
	GRPC_STATUS_DATA_LOSS = 15,
	GRPC_STATUS_UNAUTHENTICATED = 16,
};

/* "INVALID_ARGUMENT" etc.; "UNKNOWN" for a code outside the table. */
const char *grpc_status_name(int code);

#endif
