/*
 * cmd_pprof_symbolize.c — `kilnctl pprof symbolize`: names without a
 * server.
 *
 *   kilnctl pprof symbolize (-o OUT | --in-place) [--debug-dir=DIR] FILE...
 *
 * kiln-agent's local store (--local-store-directory) writes user frames as
 * bare addresses with their mappings (start, limit, file offset, file name,
 * build ID); only kernel frames come named. Run on the host that recorded
 * them, this names the user frames with the symbolizer the server uses
 * (src/symbols), the same way its background pass does: the locations
 * without lines are grouped by object (the mapping's build ID and file
 * name, so one library mapped twice is one group), each address is
 * normalized through its own mapping (symbolizer_normalize_mapping) and the
 * group is resolved in one symbolizer_resolve_batch call. The answers go
 * back with pprof_encode_symbolized, which changes nothing else.
 *
 * Where the names come from, per object (debuginfo_store_find, with no
 * store directory and no debuginfod): DIR/.build-id/xx/yyyy.debug (Debian's
 * -dbg/-dbgsym packages; DIR is /usr/lib/debug unless --debug-dir says),
 * else the mapping's own file if its build ID matches (for a file without
 * one, the hash of its .text that the agent records instead). DWARF gives
 * file:line and inlined frames (extra lines of one location, innermost
 * first); without it, .symtab or .dynsym names the function. Mapping files
 * are opened only when they are regular files (fd_open_regular): never a
 * FIFO or a device.
 *
 * Each address is resolved exactly as written: kiln-agent writes a caller
 * frame's return address minus one (inside its call instruction) and the
 * leaf's exact address, so nothing is adjusted here.
 *
 * A frame that cannot be named stays an address, which is no failure; one
 * line per FILE on stderr says how many were named and why the others
 * were not. A FILE that does not decode (not pprof, truncated gzip) or an
 * output that cannot be written is a failure naming the file (exit 1, the
 * other FILEs are still done); bad usage exits 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/grow.h"
#include "cli/cli.h"
#include "common/arena.h"
#include "common/buf.h"
#include "pprof/pprof.h"
#include "symbols/debuginfo.h"
#include "symbols/symbols.h"

/* Objects whose unnamed locations the summary line lists by name. */
#define SUMMARY_OBJECTS 4

static const char symbolize_usage[] =
    "usage: kilnctl pprof symbolize (-o OUT | --in-place) [--debug-dir=DIR] FILE...\n"
    "\n"
    "Names the user frames of pprof files (what kiln-agent --local-store-directory\n"
    "writes: addresses and mappings) on the host that recorded them, with the\n"
    "symbolizer the kiln server uses. For each mapping: the separate debug file\n"
    "DIR/.build-id/xx/yyyy.debug, else the mapped file itself if its build ID\n"
    "matches. DWARF gives function, file:line and inlined frames; a symbol table\n"
    "the function only. Frames that cannot be named stay addresses.\n"
    "\n"
    "Each address is resolved exactly as written: kiln-agent writes a caller\n"
    "frame's return address minus one and the leaf's exact address.\n"
    "\n"
    "  -o, --output=OUT   write the result to OUT (\"-\": stdout); if OUT is a\n"
    "                     directory (required with several FILEs), to OUT/NAME\n"
    "                     for each FILE named NAME\n"
    "  --in-place         replace each FILE (atomically)\n"
    "  --debug-dir=DIR    where .build-id/ debug files are (default /usr/lib/debug)\n"
    "\n"
    "One line per FILE on stderr: how many locations were named, and why the\n"
    "others were not. Exit status 1 if a FILE could not be read or written.\n";

struct symbolize_opts {
	const char *output, *debug_dir;
	bool in_place;
};

/* One location to name. */
struct sym_item {
	const char *build_id, *filename; /* its object: the mapping's */
	const pprof_mapping_msg *mapping;
	uint64_t address;
	size_t pos; /* in msg->location */
};

/* An object some of whose locations stay unnamed, for the summary. */
struct unnamed {
	const char *name; /* file name, else build ID; the profile's string */
	size_t count;
	char why[512]; /* a kiln_error message fits */
};

/* What naming one file takes and finds. The symbolizer lives across files
 * (an object is opened once); the rest is emptied for each file. */
struct sym_file {
	struct symbolizer *symbolizer;
	struct arena *arena;		      /* the frames of frames[] */
	struct pprof_location_frames *frames; /* by position in msg->location */
	struct sym_item *items;
	uint64_t *vaddrs; /* by item */
	size_t n_items, named, no_mapping;
	struct unnamed *unnamed;
	size_t n_unnamed, cap_unnamed;
	int rc; /* -ENOMEM when emit could not keep an answer */
};

/* What emit needs for the group being resolved. */
struct sym_group {
	struct sym_file *f;
	const struct sym_item *items;
	size_t no_symbol;
	bool stripped; /* the file read has only .dynsym */
};

static int cmp_items(const void *a, const void *b)
{
	const struct sym_item *x = a, *y = b;
	int c = strcmp(x->build_id, y->build_id);

	return c ? c : strcmp(x->filename, y->filename);
}

static bool same_object(const struct sym_item *a, const struct sym_item *b)
{
	return strcmp(a->build_id, b->build_id) == 0 && strcmp(a->filename, b->filename) == 0;
}

/* Notes count unnamed locations of the object shown as name, and why.
 * 0 or -ENOMEM. */
static int note_unnamed(struct sym_file *f, const char *name, size_t count, const char *why)
{
	struct unnamed *u;

	if (GROW_ARRAY(f->unnamed, f->cap_unnamed, f->n_unnamed + 1, 16))
		return -ENOMEM;
	u = &f->unnamed[f->n_unnamed++];
	u->name = name;
	u->count = count;
	snprintf(u->why, sizeof(u->why), "%s", why);
	return 0;
}

/* Why an object could not be had, from the symbolizer's error: its message
 * without the leading path (the summary names the object). */
static void failure_reason(const struct kiln_error *e, int rc, const char *path, char *out,
			   size_t outsz)
{
	const char *msg = e->msg[0] ? e->msg : strerror(-rc);
	size_t n = strlen(path);

	if (n && strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0)
		msg += n + 2;
	snprintf(out, outsz, "%s", msg);
}

/* symbols_emit_fn: keeps the frames found for items[i]. Runs under the
 * symbolizer's lock and takes none. The strings stay the symbolizer's,
 * valid until symbolizer_free, which comes after the file is written. */
static void emit_frames(void *ctx, size_t i, const struct symbols_location *loc)
{
	struct sym_group *g = ctx;
	struct sym_file *f = g->f;
	struct pprof_frame_desc *fr;

	if (loc->nframes == 0 || !loc->frames[0].function) {
		g->no_symbol++;
		g->stripped = g->stripped || loc->stripped;
		return;
	}
	fr = arena_alloc(f->arena, loc->nframes * sizeof(*fr));
	if (!fr) {
		f->rc = -ENOMEM;
		return;
	}
	for (size_t j = 0; j < loc->nframes; j++) {
		const struct symbols_frame *s = &loc->frames[j];

		fr[j] = (struct pprof_frame_desc){.function = s->function ? s->function : "??",
						  .system_name = s->system_name,
						  .filename = s->file,
						  .line = s->line,
						  .start_line = s->start_line};
	}
	f->frames[g->items[i].pos] = (struct pprof_location_frames){fr, loc->nframes};
	f->named++;
}

/* Names the n locations items[0..n) of one object (vaddrs: room for n).
 * An object that cannot be read is noted for the summary, not returned:
 * 0 or -ENOMEM. */
static int name_object(struct sym_file *f, const struct sym_item *items, uint64_t *vaddrs, size_t n)
{
	const char *build_id = items[0].build_id, *filename = items[0].filename;
	/* A relative or bracketed name ("[vdso]", "[anon:x]") is no file
	 * here: never opened relative to the working directory. */
	struct symbols_object obj = {build_id[0] ? build_id : NULL,
				     filename[0] == '/' ? filename : NULL};
	const char *name = filename[0] ? filename : build_id[0] ? build_id : "(no file name)";
	struct sym_group g = {.f = f, .items = items};
	struct kiln_error e = {0};
	char why[512]; /* a kiln_error message fits */
	int rc = 0;

	if (!obj.build_id && !obj.path)
		return note_unnamed(f, name, n, "no file to read");
	for (size_t i = 0; i < n && rc == 0; i++) {
		const pprof_mapping_msg *m = items[i].mapping;

		rc = symbolizer_normalize_mapping(f->symbolizer, &obj, items[i].address,
						  m->memory_start, m->memory_limit, m->file_offset,
						  &vaddrs[i], &e);
	}
	if (rc == 0)
		rc = symbolizer_resolve_batch(f->symbolizer, &obj, vaddrs, n, emit_frames, &g, &e);
	if (f->rc || rc == -ENOMEM)
		return -ENOMEM;
	if (rc < 0) {
		failure_reason(&e, rc, filename, why, sizeof(why));
		return note_unnamed(f, name, n, why);
	}
	if (!g.no_symbol)
		return 0;
	return note_unnamed(f, name, g.no_symbol,
			    g.stripped ? "stripped, no debug file: no symbol at those addresses"
				       : "no symbol at those addresses");
}

/* Empties f for a profile of n_locations locations. 0 or -ENOMEM. */
static int sym_file_reset(struct sym_file *f, size_t n_locations)
{
	free(f->frames);
	free(f->items);
	free(f->vaddrs);
	f->frames = calloc(n_locations + 1, sizeof(*f->frames));
	f->items = malloc((n_locations + 1) * sizeof(*f->items));
	f->vaddrs = malloc((n_locations + 1) * sizeof(*f->vaddrs));
	arena_reset(f->arena);
	f->n_items = f->named = f->no_mapping = f->n_unnamed = 0;
	f->rc = 0;
	return f->frames && f->items && f->vaddrs ? 0 : -ENOMEM;
}

static void sym_file_free(struct sym_file *f)
{
	free(f->frames);
	free(f->items);
	free(f->vaddrs);
	free(f->unnamed);
	arena_free(f->arena);
}

/* Finds the frames for every location of p that has no lines, object by
 * object. 0 or -ENOMEM. */
static int name_locations(struct sym_file *f, const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int rc = sym_file_reset(f, m->n_location);

	if (rc)
		return rc;
	for (size_t i = 0; i < m->n_location; i++) {
		const pprof_location_msg *l = m->location[i];
		const pprof_mapping_msg *mp = pprof_mapping(p, l->mapping_id);

		if (l->n_line > 0)
			continue; /* named already: a kernel frame */
		if (!mp) {
			f->no_mapping++;
			continue;
		}
		f->items[f->n_items++] =
		    (struct sym_item){.build_id = pprof_string(p, mp->build_id),
				      .filename = pprof_string(p, mp->filename),
				      .mapping = mp,
				      .address = l->address,
				      .pos = i};
	}
	qsort(f->items, f->n_items, sizeof(*f->items), cmp_items);
	for (size_t lo = 0, hi; lo < f->n_items && rc == 0; lo = hi) {
		for (hi = lo + 1; hi < f->n_items && same_object(&f->items[lo], &f->items[hi]);)
			hi++;
		rc = name_object(f, f->items + lo, f->vaddrs + lo, hi - lo);
	}
	return rc;
}

static int cmp_unnamed(const void *a, const void *b)
{
	const struct unnamed *x = a, *y = b;

	return x->count != y->count ? (x->count < y->count ? 1 : -1) : strcmp(x->name, y->name);
}

/* "FILE: N of M locations named (K not: C in OBJECT (WHY), ...)", on
 * stderr. M counts the locations that had no lines (kernel frames come
 * named); the objects with the most unnamed ones are listed first. */
static void print_summary(struct sym_file *f, const char *file)
{
	size_t total = f->n_items + f->no_mapping, left = total - f->named;

	fprintf(stderr, "%s: %zu of %zu locations named", file, f->named, total);
	if (left == 0) {
		fputc('\n', stderr);
		return;
	}
	fprintf(stderr, " (%zu not:", left);
	if (f->n_unnamed)
		qsort(f->unnamed, f->n_unnamed, sizeof(*f->unnamed), cmp_unnamed);
	for (size_t i = 0; i < f->n_unnamed && i < SUMMARY_OBJECTS; i++)
		fprintf(stderr, "%s %zu in %s (%s)", i ? "," : "", f->unnamed[i].count,
			f->unnamed[i].name, f->unnamed[i].why);
	if (f->n_unnamed > SUMMARY_OBJECTS) {
		size_t rest = 0;

		for (size_t i = SUMMARY_OBJECTS; i < f->n_unnamed; i++)
			rest += f->unnamed[i].count;
		fprintf(stderr, ", %zu in %zu more objects", rest, f->n_unnamed - SUMMARY_OBJECTS);
	}
	if (f->no_mapping)
		fprintf(stderr, "%s %zu without a mapping", f->n_unnamed ? "," : "", f->no_mapping);
	fputs(")\n", stderr);
}

/* Where FILE's result goes: OUT, OUT/basename(FILE) when OUT is a
 * directory, or FILE itself (--in-place). */
static void output_path(const struct symbolize_opts *o, const char *file, bool out_is_dir,
			char *path, size_t size)
{
	const char *base = strrchr(file, '/');

	if (o->in_place)
		snprintf(path, size, "%s", file);
	else if (out_is_dir)
		snprintf(path, size, "%s/%s", o->output, base ? base + 1 : file);
	else
		snprintf(path, size, "%s", o->output);
}

/* Names one FILE and writes the result. 0, or 1 after printing why the
 * file failed. */
static int symbolize_file(struct sym_file *f, const struct symbolize_opts *o, const char *file,
			  bool out_is_dir)
{
	struct kiln_error err = {0};
	struct pprof_profile *p = NULL;
	struct buf out = {0};
	char path[4096];
	int rc;

	rc = pprof_decode_file(file, NULL, &p, &err);
	if (rc)
		goto fail;
	rc = name_locations(f, p);
	if (rc) {
		kiln_error_set(&err, -rc, "%s: %s", file, strerror(-rc));
		goto fail;
	}
	rc = pprof_encode_symbolized(p, f->frames, true, &out, &err);
	if (rc) {
		kiln_error_prefix(&err, "%s: ", file);
		goto fail;
	}
	output_path(o, file, out_is_dir, path, sizeof(path));
	if (strcmp(path, "-") == 0)
		rc = fwrite(out.data, 1, out.len, stdout) == out.len && fflush(stdout) == 0 ? 0
											    : -EIO;
	else
		rc = buf_write_file(&out, path);
	if (rc) {
		kiln_error_set(&err, -rc, "%s: cannot write: %s", path, strerror(-rc));
		goto fail;
	}
	print_summary(f, file);
	buf_free(&out);
	pprof_profile_free(p);
	return 0;
fail:
	fprintf(stderr, "kilnctl pprof symbolize: %s\n", err.msg);
	buf_free(&out);
	pprof_profile_free(p);
	return 1;
}

static int cmp_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* With several FILEs into directory dir, two with the same name would
 * overwrite each other: refused before anything is written. */
static bool basenames_unique(char **files, int n, const char *dir)
{
	const char **names = malloc((size_t)n * sizeof(*names));
	bool ok = names != NULL;

	for (int i = 0; ok && i < n; i++) {
		const char *base = strrchr(files[i], '/');

		names[i] = base ? base + 1 : files[i];
	}
	if (ok)
		qsort(names, (size_t)n, sizeof(*names), cmp_strings);
	for (int i = 1; ok && i < n; i++) {
		if (strcmp(names[i - 1], names[i]) == 0) {
			fprintf(stderr,
				"kilnctl pprof symbolize: two FILEs named %s would both be "
				"written to %s\n",
				names[i], dir);
			ok = false;
		}
	}
	free(names);
	return ok;
}

/* Parses the flags into o; returns optind of the first FILE, -1 for
 * --help, -2 for bad usage (said). */
static int parse_symbolize(int argc, char **argv, struct symbolize_opts *o)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"in-place", no_argument, NULL, 'i'},
	    {"debug-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+o:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			o->output = optarg;
			break;
		case 'i':
			o->in_place = true;
			break;
		case 'd':
			o->debug_dir = optarg;
			break;
		case 'h':
			return -1;
		default:
			fprintf(stderr,
				"kilnctl pprof symbolize: unknown option or missing value: %s\n",
				argv[optind - 1]);
			return -2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "kilnctl pprof symbolize: no input FILE\n");
		return -2;
	}
	if (!o->output == !o->in_place) {
		fprintf(stderr, "kilnctl pprof symbolize: give either -o OUT or --in-place\n");
		return -2;
	}
	return optind;
}

int cmd_pprof_symbolize(int argc, char **argv)
{
	struct symbolize_opts o = {0};
	struct debuginfo_store *store = NULL;
	struct sym_file f = {0};
	struct kiln_error err = {0};
	struct stat st;
	bool out_is_dir = false;
	int first = parse_symbolize(argc, argv, &o), failed = 0, rc = 1;

	if (first == -1) {
		fputs(symbolize_usage, stdout);
		return 0;
	}
	if (first < 0) {
		/* The usage line; --help has the rest. */
		fprintf(stderr, "%.*s", (int)(strchr(symbolize_usage, '\n') - symbolize_usage + 1),
			symbolize_usage);
		return 2;
	}
	/* -o DIR: each FILE keeps its name there (required for several). */
	out_is_dir = o.output && stat(o.output, &st) == 0 && S_ISDIR(st.st_mode);
	if (argc - first > 1 && o.output && !out_is_dir) {
		fprintf(stderr,
			"kilnctl pprof symbolize: with several FILEs, -o must name a directory: "
			"%s\n",
			o.output);
		return 2;
	}
	if (out_is_dir && !basenames_unique(argv + first, argc - first, o.output))
		return 2;
	/* No store directory, no debuginfod: the debug dir and the files. */
	const char *const local_dirs[] = {o.debug_dir ? o.debug_dir : "/usr/lib/debug", NULL};
	store = debuginfo_store_new(&(struct debuginfo_config){.local_dirs = local_dirs}, &err);
	if (!store) {
		fprintf(stderr, "kilnctl pprof symbolize: %s\n", err.msg);
		goto out;
	}
	f.symbolizer = symbolizer_new(&(struct symbolizer_config){.debuginfo = store});
	f.arena = arena_new(0);
	if (!f.symbolizer || !f.arena) {
		fprintf(stderr, "kilnctl pprof symbolize: out of memory\n");
		goto out;
	}
	for (int i = first; i < argc; i++)
		failed += symbolize_file(&f, &o, argv[i], out_is_dir);
	rc = failed ? 1 : 0;
out:
	sym_file_free(&f);
	symbolizer_free(f.symbolizer);
	debuginfo_store_free(store);
	return rc;
}
