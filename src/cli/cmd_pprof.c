/*
 * cmd_pprof.c — `kilnctl pprof`: folded, top, merge and validate on local
 * pprof files (gzip or raw); symbolize, which names the addresses of
 * kiln-agent's local-store files, lives in cmd_pprof_symbolize.c.
 *
 * Several FILEs are merged first (they must share sample types), so
 * `folded a b` reports the sum of a and b. Every failure is one line on
 * stderr naming the file and the problem, with exit status 1; bad usage
 * exits with 2.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "pprof/pprof.h"

static const char pprof_usage[] =
    "usage: kilnctl pprof SUBCOMMAND [OPTIONS] FILE...\n"
    "\n"
    "  folded [--sample-type=NAME] FILE...   folded stacks (root;...;leaf VALUE)\n"
    "  top [--sample-type=NAME] [-n N] [--raw] FILE...\n"
    "                                        flat/cum per function, like go tool pprof -top\n"
    "  merge -o OUT FILE...                  merge into OUT (gzip pprof)\n"
    "  validate FILE...                      check that each FILE is a valid profile\n"
    "  symbolize (-o OUT | --in-place) [--debug-dir=DIR] FILE...\n"
    "                                        name the user frames (addresses) of\n"
    "                                        kiln-agent's local-store files on this\n"
    "                                        host; `symbolize --help` says how\n"
    "\n"
    "The sample type defaults to the profile's default_sample_type, else the last\n"
    "one (as pprof does). Several FILEs are merged first (not by symbolize: each\n"
    "FILE is written on its own).\n";

static int fail(const char *what, const struct kiln_error *err)
{
	fprintf(stderr, "kilnctl pprof %s: %s\n", what, err->msg[0] ? err->msg : "failed");
	return 1;
}

/* Decodes files[0..n) and merges them into one profile. */
static int load(char **files, int n, struct pprof_profile **out, struct kiln_error *err)
{
	struct pprof_builder *b;
	int rc = 0;

	if (n == 1)
		return pprof_decode_file(files[0], NULL, out, err);
	b = pprof_builder_new();
	if (!b)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (int i = 0; i < n && !rc; i++) {
		struct pprof_profile *p = NULL;

		rc = pprof_decode_file(files[i], NULL, &p, err);
		if (!rc) {
			rc = pprof_builder_merge(b, p, err);
			if (rc)
				kiln_error_prefix(err, "%s: ", files[i]);
		}
		pprof_profile_free(p);
	}
	if (!rc)
		rc = pprof_builder_to_profile(b, out, err);
	pprof_builder_free(b);
	return rc;
}

static int write_all(const struct buf *b)
{
	return b->len && fwrite(b->data, 1, b->len, stdout) != b->len ? -EIO : 0;
}

struct opts {
	const char *sample_type;
	const char *output;
	long nodecount;
	bool raw;
};

/* Parses options shared by the subcommands; returns optind or -1. */
static int parse_opts(int argc, char **argv, const char *allowed, struct opts *o)
{
	static const struct option longopts[] = {
	    {"sample-type", required_argument, NULL, 't'},
	    {"output", required_argument, NULL, 'o'},
	    {"nodecount", required_argument, NULL, 'n'},
	    {"raw", no_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+o:n:h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(pprof_usage, stdout);
			exit(0);
		}
		if (c == '?' || !strchr(allowed, c)) {
			fprintf(stderr, "kilnctl pprof %s: unknown or misplaced option %s\n",
				argv[0], argv[optind - 1]);
			return -1;
		}
		if (c == 't')
			o->sample_type = optarg;
		else if (c == 'o')
			o->output = optarg;
		else if (c == 'n')
			o->nodecount = strtol(optarg, NULL, 10);
		else if (c == 'r')
			o->raw = true;
	}
	if (optind >= argc) {
		fprintf(stderr, "kilnctl pprof %s: no input FILE\n", argv[0]);
		return -1;
	}
	return optind;
}

static int run_folded(int argc, char **argv)
{
	struct opts o = {0};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL;
	struct buf out = {0};
	int first = parse_opts(argc, argv, "t", &o), ti, rc = 1;

	if (first < 0)
		return 2;
	if (load(argv + first, argc - first, &p, &err))
		return fail("folded", &err);
	ti = pprof_sample_type_index(p, o.sample_type, &err);
	if (ti < 0) {
		if (argc - first == 1)
			kiln_error_prefix(&err, "%s: ", argv[first]);
		fail("folded", &err);
		goto out;
	}
	if (pprof_folded(p, ti, &out) || write_all(&out)) {
		fprintf(stderr, "kilnctl pprof folded: out of memory or write error\n");
		goto out;
	}
	rc = 0;
out:
	buf_free(&out);
	pprof_profile_free(p);
	return rc;
}

/* Scales v of this unit the way pprof prints it ("1.50s", "12.25MB"). */
static void format_value(char *dst, size_t n, int64_t v, const char *unit, bool raw)
{
	static const struct {
		const char *unit, *name;
		double factor;
	} time_units[] = {{"nanoseconds", "ns", 1},
			  {"nanoseconds", "us", 1e3},
			  {"nanoseconds", "ms", 1e6},
			  {"nanoseconds", "s", 1e9},
			  {"nanoseconds", "hrs", 3.6e12}},
	  byte_units[] = {{"bytes", "B", 1},
			  {"bytes", "kB", 1024.0},
			  {"bytes", "MB", 1024.0 * 1024},
			  {"bytes", "GB", 1024.0 * 1024 * 1024},
			  {"bytes", "TB", 1024.0 * 1024 * 1024 * 1024}};
	const __typeof__(time_units[0]) *units = NULL;
	size_t n_units = 0, k = 0;
	double a = (double)(v < 0 ? -v : v);
	char *dot;

	if (!raw && strcmp(unit, "nanoseconds") == 0) {
		units = time_units;
		n_units = sizeof(time_units) / sizeof(time_units[0]);
	} else if (!raw && strcmp(unit, "bytes") == 0) {
		units = byte_units;
		n_units = sizeof(byte_units) / sizeof(byte_units[0]);
	}
	if (!units || v == 0) {
		snprintf(dst, n, "%" PRId64 "%s", v, units ? units[0].name : "");
		return;
	}
	while (k + 1 < n_units && a >= units[k + 1].factor)
		k++;
	snprintf(dst, n, "%.2f", (double)v / units[k].factor);
	/* "1.50" -> "1.5", "2.00" -> "2", as pprof prints. */
	dot = strchr(dst, '.');
	if (dot) {
		char *end = dst + strlen(dst);

		while (end > dot + 1 && end[-1] == '0')
			*--end = '\0';
		if (end == dot + 1)
			*dot = '\0';
	}
	strncat(dst, units[k].name, n - strlen(dst) - 1);
}

static void pct(char *dst, size_t n, int64_t v, int64_t total)
{
	snprintf(dst, n, "%.2f%%", total ? 100.0 * (double)v / (double)total : 0.0);
}

static int run_top(int argc, char **argv)
{
	struct opts o = {.nodecount = -1};
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL;
	struct pprof_top top = {0};
	const pprof_msg *m;
	const char *type, *unit;
	char a[40], b[40], c[16], d[16], e[16];
	int64_t sum = 0;
	int first = parse_opts(argc, argv, "tnr", &o), ti;

	if (first < 0)
		return 2;
	if (load(argv + first, argc - first, &p, &err))
		return fail("top", &err);
	ti = pprof_sample_type_index(p, o.sample_type, &err);
	if (ti < 0) {
		if (argc - first == 1)
			kiln_error_prefix(&err, "%s: ", argv[first]);
		pprof_profile_free(p);
		return fail("top", &err);
	}
	if (pprof_top(p, ti, &top)) {
		pprof_profile_free(p);
		fprintf(stderr, "kilnctl pprof top: out of memory\n");
		return 1;
	}
	m = pprof_profile_msg(p);
	type = pprof_string(p, m->sample_type[ti]->type);
	unit = pprof_string(p, m->sample_type[ti]->unit);
	format_value(a, sizeof(a), top.total, unit, o.raw);
	printf("Type: %s\n", type);
	printf("Showing nodes accounting for %s, 100%% of %s total\n", a, a);
	printf("%10s %6s %6s %10s %6s\n", "flat", "flat%", "sum%", "cum", "cum%");
	for (size_t i = 0; i < top.n && (o.nodecount < 0 || (long)i < o.nodecount); i++) {
		const struct pprof_top_entry *t = &top.entries[i];

		sum += t->flat;
		format_value(a, sizeof(a), t->flat, unit, o.raw);
		format_value(b, sizeof(b), t->cum, unit, o.raw);
		pct(c, sizeof(c), t->flat, top.total);
		pct(d, sizeof(d), sum, top.total);
		pct(e, sizeof(e), t->cum, top.total);
		printf("%10s %6s %6s %10s %6s  %s%s\n", a, c, d, b, e, t->name,
		       !t->called_inline   ? ""
		       : t->called_outline ? " (partial-inline)"
					   : " (inline)");
	}
	pprof_top_free(&top);
	pprof_profile_free(p);
	return fflush(stdout) ? 1 : 0;
}

static int run_merge(int argc, char **argv)
{
	struct opts o = {0};
	struct kiln_error err = {0};
	struct pprof_builder *b = NULL;
	struct buf out = {0};
	int first = parse_opts(argc, argv, "o", &o), rc = 1;

	if (first < 0)
		return 2;
	if (!o.output) {
		fprintf(stderr, "kilnctl pprof merge: -o OUT is required\n");
		return 2;
	}
	b = pprof_builder_new();
	if (!b) {
		fprintf(stderr, "kilnctl pprof merge: out of memory\n");
		return 1;
	}
	for (int i = first; i < argc; i++) {
		struct pprof_profile *p = NULL;

		if (pprof_decode_file(argv[i], NULL, &p, &err)) {
			fail("merge", &err);
			goto out;
		}
		if (pprof_builder_merge(b, p, &err)) {
			kiln_error_prefix(&err, "%s: ", argv[i]);
			pprof_profile_free(p);
			fail("merge", &err);
			goto out;
		}
		pprof_profile_free(p);
	}
	if (pprof_builder_encode(b, true, &out)) {
		fprintf(stderr, "kilnctl pprof merge: out of memory encoding\n");
		goto out;
	}
	if (buf_write_file(&out, o.output)) {
		fprintf(stderr, "kilnctl pprof merge: %s: cannot write: %s\n", o.output,
			strerror(errno));
		goto out;
	}
	rc = 0;
out:
	buf_free(&out);
	pprof_builder_free(b);
	return rc;
}

static int run_validate(int argc, char **argv)
{
	struct opts o = {0};
	int first = parse_opts(argc, argv, "", &o), rc = 0;

	if (first < 0)
		return 2;
	for (int i = first; i < argc; i++) {
		struct kiln_error err = {0};
		struct pprof_profile *p = NULL;
		const pprof_msg *m;

		if (pprof_decode_file(argv[i], NULL, &p, &err)) {
			rc = fail("validate", &err);
			continue;
		}
		m = pprof_profile_msg(p);
		printf("%s: ok: %zu samples, %zu locations, %zu functions, %zu mappings; types:",
		       argv[i], m->n_sample, m->n_location, m->n_function, m->n_mapping);
		for (size_t t = 0; t < m->n_sample_type; t++)
			printf(" %s/%s", pprof_string(p, m->sample_type[t]->type),
			       pprof_string(p, m->sample_type[t]->unit));
		printf("\n");
		pprof_profile_free(p);
	}
	return rc;
}

int cmd_pprof(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int argc, char **argv);
	} subs[] = {
	    {"folded", run_folded},
	    {"top", run_top},
	    {"merge", run_merge},
	    {"validate", run_validate},
	    {"symbolize", cmd_pprof_symbolize},
	};

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		fputs(pprof_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].run(argc - 1, argv + 1);
	fprintf(stderr, "kilnctl pprof: unknown subcommand \"%s\"\n%s", argv[1], pprof_usage);
	return 2;
}
