/*
 * privileges.c — what kiln-agent needs of the kernel, checked by
 * capability rather than by euid.
 *
 * The agent runs as any user that holds the capabilities below (a systemd
 * unit with AmbientCapabilities, contrib/systemd/kiln-agent.service), and
 * root without them (a container with a reduced bounding set) is refused
 * with the same message, which names each missing capability and what it
 * is for:
 *   CAP_BPF          load the BPF programs and maps;
 *   CAP_PERFMON      system-wide perf events, the BPF helpers that read
 *                    kernel and user memory and stacks, kprobes;
 *   CAP_SYS_PTRACE   /proc/PID/maps and the memory of other users'
 *                    processes (mappings, build IDs, interpreter frames);
 *   CAP_DAC_READ_SEARCH  the binaries those processes run, wherever they
 *                    lie (a 0700 home directory), for tables and build IDs.
 * The first two are required: without them nothing is sampled. Without
 * either of the last two the agent still runs, but other users' processes
 * come out as bare, unwound-by-frame-pointer addresses; it says so once at
 * start. Kernels before 5.8 have no CAP_BPF or CAP_PERFMON (cap_last_cap <
 * 39): CAP_SYS_ADMIN stands for both there.
 */
#include "agent/agent.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

struct cap_need {
	int cap;
	const char *name;
	const char *why;
	bool required;
};

static const struct cap_need cap_needs[] = {
    {CAP_BPF, "CAP_BPF", "to load its BPF programs", true},
    {CAP_PERFMON, "CAP_PERFMON", "to open system-wide perf events and read stacks", true},
    {CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "to read other users' process mappings and memory", false},
    {CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", "to read the binaries other users' processes run",
     false},
};

/* The highest capability this kernel knows, or -1. */
static int cap_last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* The effective set of this process as a 64-bit mask; -errno on failure. */
static int effective_caps(uint64_t *out)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -errno;
	*out = (uint64_t)data[0].effective | (uint64_t)data[1].effective << 32;
	return 0;
}

static bool has_cap(uint64_t caps, int cap, bool legacy)
{
	if (legacy && (cap == CAP_BPF || cap == CAP_PERFMON))
		cap = CAP_SYS_ADMIN;
	return (caps >> cap) & 1;
}

/* Appends ", NAME (why)" or "NAME (why)" to out. */
static void list_cap(char *out, size_t outsz, const struct cap_need *n, bool legacy)
{
	size_t len = strlen(out);

	snprintf(out + len, outsz - len, "%s%s (%s)", len ? ", " : "",
		 legacy && (n->cap == CAP_BPF || n->cap == CAP_PERFMON) ? "CAP_SYS_ADMIN" : n->name,
		 n->why);
}

int agent_check_privileges(struct kiln_error *err)
{
	char missing[512] = "", degraded[512] = "";
	bool legacy = cap_last_cap() >= 0 && cap_last_cap() < CAP_BPF;
	uint64_t caps = 0;
	int rc = effective_caps(&caps);

	if (rc)
		return kiln_error_set(err, -rc, "reading this process's capabilities: %s",
				      strerror(-rc));
	for (size_t i = 0; i < sizeof(cap_needs) / sizeof(cap_needs[0]); i++) {
		const struct cap_need *n = &cap_needs[i];

		if (has_cap(caps, n->cap, legacy))
			continue;
		if (n->required)
			list_cap(missing, sizeof(missing), n, legacy);
		else
			list_cap(degraded, sizeof(degraded), n, legacy);
	}
	if (missing[0])
		return kiln_error_set(
		    err, EPERM,
		    "kiln-agent lacks %s: run it as root, or grant it CAP_BPF, CAP_PERFMON, "
		    "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (systemd: AmbientCapabilities= as in "
		    "contrib/systemd/kiln-agent.service; a shell: setpriv --inh-caps and "
		    "--ambient-caps, see docs/SECURITY.md)",
		    missing);
	if (degraded[0])
		log_warn(
		    "kiln-agent lacks %s: processes of other users will have bare addresses "
		    "and frame-pointer stacks only; grant the missing capabilities for whole-host "
		    "profiles",
		    degraded);
	return 0;
}
