/*
 * cmd_debuginfo.c — `kilnctl debuginfo`: what parca-debuginfo does.
 *
 *   kilnctl debuginfo extract [-o DIR] PATH...
 *       writes DIR/<build-id>.debuginfo (or PATH.debuginfo without -o): the
 *       debug-relevant parts only (symbols_extract_debuginfo).
 *   kilnctl debuginfo upload --store-address=HOST:PORT [--insecure]
 *                            [--insecure-skip-verify] [--bearer-token=T] [--force] PATH...
 *       extracts and uploads through DebuginfoService (ShouldInitiateUpload,
 *       InitiateUpload, streaming Upload, MarkUploadFinished).
 *   kilnctl debuginfo ls --store-address=HOST:PORT [--insecure]
 *       lists what the server holds (GET /api/v1/debuginfo).
 *   kilnctl debuginfo symbolize -e PATH [--build-id=ID] [--debuginfod-url=URL]...
 *                               [--cache-dir=DIR] [--timeout=S] ADDR...
 *       resolves ELF addresses like `addr2line -i -f`, using the same store
 *       lookup as the server (local, build-id dirs, debuginfod upstreams).
 *
 * upload and ls live in cmd_debuginfo_remote.c; this file holds the local
 * subcommands and the dispatch.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "symbols/debuginfo.h"
#include "symbols/symbols.h"

static void debuginfo_usage(FILE *f)
{
	fprintf(f,
		"Usage: kilnctl debuginfo COMMAND [flags] ...\n"
		"\n"
		"Commands:\n"
		"  extract [-o DIR] PATH...       write the debug parts of binaries\n"
		"  upload --store-address=HOST:PORT [--insecure] [--insecure-skip-verify]\n"
		"         [--bearer-token=T] [--force] PATH...   upload them to a kiln server\n"
		"  ls --store-address=HOST:PORT [--insecure]     list what the server holds\n"
		"  symbolize -e PATH [--build-id=ID] [--debuginfod-url=URL]... [--cache-dir=DIR]\n"
		"         [--timeout=SECONDS] ADDR...            resolve addresses (addr2line -i "
		"-f)\n");
}

static int cmd_extract(int argc, char **argv)
{
	const char *outdir = NULL;
	int opt, failed = 0;

	optind = 1;
	while ((opt = getopt(argc, argv, "o:h")) != -1) {
		if (opt == 'o') {
			outdir = optarg;
		} else {
			debuginfo_usage(opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "kilnctl debuginfo extract: no PATH given\n");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct kiln_error e = {0};
		struct elfinfo info;
		char out[PATH_MAX];

		if (elfinfo_read_file(argv[i], &info, &e) < 0) {
			fprintf(stderr, "kilnctl debuginfo extract: %s\n", e.msg);
			failed++;
			continue;
		}
		if (outdir && info.build_id[0])
			snprintf(out, sizeof(out), "%s/%s.debuginfo", outdir, info.build_id);
		else if (outdir)
			snprintf(out, sizeof(out), "%s/%s.debuginfo", outdir,
				 strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i]);
		else
			snprintf(out, sizeof(out), "%s.debuginfo", argv[i]);
		if (symbols_extract_debuginfo(argv[i], out, &e) < 0) {
			fprintf(stderr, "kilnctl debuginfo extract: %s\n", e.msg);
			failed++;
			continue;
		}
		printf("%s\t%s\t%s\n", argv[i], info.build_id[0] ? info.build_id : "-", out);
	}
	return failed ? 1 : 0;
}

static void print_frames(const struct symbols_location *loc, const char *path, uint64_t addr)
{
	char label[512];

	if (loc->nframes == 0) {
		printf("%s\n??:0\n", symbols_format_unresolved(label, sizeof(label), path, addr));
		return;
	}
	for (size_t j = 0; j < loc->nframes; j++) {
		const struct symbols_frame *f = &loc->frames[j];

		printf("%s\n%s:%lld\n", f->function ? f->function : "??", f->file ? f->file : "??",
		       (long long)f->line);
	}
}

static int cmd_symbolize(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"build-id", required_argument, NULL, 'b'},
	    {"debuginfod-url", required_argument, NULL, 'u'},
	    {"cache-dir", required_argument, NULL, 'c'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *path = NULL, *build_id = NULL, *cache = NULL;
	const char *urls[17] = {0};
	size_t nurls = 0;
	int opt, timeout = 30, rc = 1;
	struct debuginfo_store *store = NULL;
	struct symbolizer *s = NULL;
	struct kiln_error e = {0};
	struct elfinfo info;
	char tmpdir[] = "/tmp/kilnctl-debuginfo-XXXXXX";
	bool made_tmp = false;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "e:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'e':
			path = optarg;
			break;
		case 'b':
			build_id = optarg;
			break;
		case 'u':
			if (nurls < 16)
				urls[nurls++] = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		case 't':
			timeout = atoi(optarg);
			break;
		default:
			debuginfo_usage(opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!path || optind >= argc) {
		fprintf(stderr,
			"kilnctl debuginfo symbolize: need -e PATH and at least one ADDR\n");
		return 2;
	}
	if (!build_id && elfinfo_read_file(path, &info, &e) == 0 && info.build_id[0])
		build_id = info.build_id;
	if (!cache && nurls) {
		if (!mkdtemp(tmpdir)) {
			perror("kilnctl debuginfo symbolize: mkdtemp");
			return 1;
		}
		cache = tmpdir;
		made_tmp = true;
	}
	static const char *const local_dirs[] = {"/usr/lib/debug", NULL};
	struct debuginfo_config dc = {.storage_path = cache,
				      .upstreams = urls,
				      .http_timeout_seconds = timeout,
				      .local_dirs = local_dirs};
	store = debuginfo_store_new(&dc, &e);
	if (!store) {
		fprintf(stderr, "kilnctl debuginfo symbolize: %s\n", e.msg);
		goto out;
	}
	s = symbolizer_new(&(struct symbolizer_config){.debuginfo = store});
	if (!s)
		goto out;
	struct symbols_object obj = {build_id, path};
	for (int i = optind; i < argc; i++) {
		uint64_t addr = strtoull(argv[i], NULL, 16);
		struct symbols_location loc;
		time_t deadline = time(NULL) + timeout + 1;
		int r;

		/* A debuginfod fetch runs in the background: wait for it here. */
		while ((r = symbolizer_resolve(s, &obj, addr, &loc, NULL)) == -EAGAIN &&
		       time(NULL) < deadline)
			usleep(50 * 1000);
		if (r < 0 && r != -ENOENT) {
			fprintf(stderr, "kilnctl debuginfo symbolize: %s: %s\n", path,
				strerror(-r));
			goto out;
		}
		print_frames(&loc, path, addr);
	}
	rc = 0;
out:
	symbolizer_free(s);
	debuginfo_store_free(store);
	if (made_tmp) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "kilnctl: could not remove %s\n", tmpdir);
	}
	return rc;
}

int cmd_debuginfo(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		debuginfo_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "extract") == 0)
		return cmd_extract(argc - 1, argv + 1);
	if (strcmp(argv[1], "symbolize") == 0)
		return cmd_symbolize(argc - 1, argv + 1);
	if (strcmp(argv[1], "upload") == 0)
		return cmd_debuginfo_upload(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0)
		return cmd_debuginfo_ls(argc - 1, argv + 1);
	fprintf(stderr, "kilnctl debuginfo: unknown command \"%s\"\n", argv[1]);
	debuginfo_usage(stderr);
	return 2;
}
