/*
 * reflection_data.c — the FileDescriptorSet of proto/ (build/gen/
 * reflection.pb, made by mk/reflection.mk), embedded as read-only bytes
 * for reflection.c. The path is relative to the repository root, where
 * make compiles.
 */
#include <stddef.h>
#include <stdint.h>

#include "server/reflection.h"

__asm__(".section .rodata\n"
	".balign 8\n"
	"kiln_reflection_fds_start:\n"
	".incbin \"build/gen/reflection.pb\"\n"
	"kiln_reflection_fds_end:\n"
	".previous\n");

extern const uint8_t kiln_reflection_fds_start[] __asm__("kiln_reflection_fds_start");
extern const uint8_t kiln_reflection_fds_end[] __asm__("kiln_reflection_fds_end");

const uint8_t *reflection_descriptor_set(size_t *len)
{
	*len = (size_t)(kiln_reflection_fds_end - kiln_reflection_fds_start);
	return kiln_reflection_fds_start;
}
