/*
 * cmd_push.c — `kilnctl push`: write pprof files to a kiln server.
 *
 *   kilnctl push [--address=HOST:PORT] [--name=NAME] [--labels=K=V,K=V]
 *                [--label=K=V]... [--bearer-token=T | --bearer-token-file=F]
 *                [--tls-*] FILE...
 *
 * The files go out as one ProfileStoreService/WriteRaw request, as Parca's
 * agent sends them: one series with the given labels, one raw sample per
 * file (gzipped or not, sent as they are). Each file is decoded here first,
 * so a file that is not a pprof profile is refused with the decoder's
 * message before anything is sent. Without --name the profile is named the
 * way Parca names scraped Go profiles (process_cpu for a CPU profile,
 * memory for a heap profile...), from the first file's period type.
 * Pushing needs a token of role write on a server that requires tokens.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "client/client.h"
#include "parca/profilestore/v1alpha1/profilestore.pb-c.h"
#include "pprof/pprof.h"

#define WRITE_RAW      "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
#define MAX_LABELS     64
#define MAX_FILE_BYTES ((size_t)256 << 20)

static void push_usage(FILE *f)
{
	fprintf(f, "Usage: kilnctl push [flags] FILE...\n"
		   "\n"
		   "Writes pprof files (gzipped or not) to a kiln server as one series.\n"
		   "\n"
		   "Flags:\n"
		   "  --address=HOST:PORT   server (default 127.0.0.1:7070); https:// for TLS\n"
		   "  --name=NAME           profile name (__name__); default from the profile:\n"
		   "                        process_cpu, memory, goroutine, else profile\n"
		   "  --labels=K=V,K=V      series labels\n"
		   "  --label=K=V           one series label (repeatable)\n"
		   "  --bearer-token=T      sent as Authorization: Bearer T (role write)\n"
		   "  --bearer-token-file=F the same, read from F's first line\n"
		   "  --tls-ca-file=F       check an https server's certificate with these CAs\n"
		   "  --tls-cert-file=F --tls-key-file=F  client certificate (mTLS)\n"
		   "  --insecure-skip-verify  TLS without certificate checks\n"
		   "\n"
		   "Example:\n"
		   "  kilnctl push --labels=job=api,instance=host1 cpu.pprof\n");
}

struct push_labels {
	Parca__Profilestore__V1alpha1__Label v[MAX_LABELS];
	Parca__Profilestore__V1alpha1__Label *p[MAX_LABELS];
	size_t n;
};

/* Adds "K=V" (s is modified in place; it must outlive the request). */
static int add_label(struct push_labels *l, char *s)
{
	char *eq = strchr(s, '=');
	if (!eq || eq == s) {
		fprintf(stderr, "kilnctl push: label \"%s\": expected NAME=VALUE\n", s);
		return -EINVAL;
	}
	if (l->n + 1 >= MAX_LABELS) {
		fprintf(stderr, "kilnctl push: more than %d labels\n", MAX_LABELS - 1);
		return -E2BIG;
	}
	*eq = '\0';
	parca__profilestore__v1alpha1__label__init(&l->v[l->n]);
	l->v[l->n].name = s;
	l->v[l->n].value = eq + 1;
	l->p[l->n] = &l->v[l->n];
	l->n++;
	return 0;
}

/* "K=V,K=V" (modified in place). */
static int add_label_list(struct push_labels *l, char *s)
{
	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (add_label(l, tok))
			return -EINVAL;
	return 0;
}

/* The name Parca gives a scraped Go profile of this kind. */
static const char *default_name(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	const char *period = m->period_type ? pprof_string(p, m->period_type->type) : "";
	if (strcmp(period, "cpu") == 0)
		return "process_cpu";
	if (strcmp(period, "space") == 0)
		return "memory";
	if (strcmp(period, "goroutine") == 0)
		return "goroutine";
	return "profile";
}

int cmd_push(int argc, char **argv)
{
	static struct cli_server_opts srv = {.address = "127.0.0.1:7070"};
	const char *name = NULL;
	struct push_labels labels = {.n = 1}; /* [0] is __name__ */
	struct grpc_client_config cfg = {0};
	struct grpc_client *client = NULL;
	struct buf *files = NULL;
	Parca__Profilestore__V1alpha1__RawSample *samples = NULL, **samples_p = NULL;
	struct kiln_error err = {0};
	struct buf req = {0}, resp = {0};
	size_t n_files = 0;
	int ret = 1;
	enum { O_NAME = 1, O_LABELS, O_LABEL, O_SKIP_VERIFY, O_HELP };
	static const struct option opts[] = {
	    CLI_SERVER_OPTIONS,
	    {"name", required_argument, NULL, O_NAME},
	    {"labels", required_argument, NULL, O_LABELS},
	    {"label", required_argument, NULL, O_LABEL},
	    {"insecure-skip-verify", no_argument, NULL, O_SKIP_VERIFY},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int taken = cli_server_opt(&srv, o, optarg, "push");
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		switch (o) {
		case O_NAME:
			name = optarg;
			break;
		case O_LABELS:
			if (add_label_list(&labels, optarg))
				return 2;
			break;
		case O_LABEL:
			if (add_label(&labels, optarg))
				return 2;
			break;
		case O_SKIP_VERIFY:
			cfg.skip_verify = true;
			break;
		case O_HELP:
		case 'h':
			push_usage(stdout);
			return 0;
		default:
			push_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "kilnctl push: no FILE to push\n");
		push_usage(stderr);
		return 2;
	}

	n_files = (size_t)(argc - optind);
	files = calloc(n_files, sizeof(*files));
	samples = calloc(n_files, sizeof(*samples));
	samples_p = calloc(n_files, sizeof(*samples_p));
	if (!files || !samples || !samples_p) {
		fprintf(stderr, "kilnctl push: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < n_files; i++) {
		const char *path = argv[optind + (int)i];
		struct pprof_profile *p = NULL;
		int rc = buf_read_file(&files[i], path, MAX_FILE_BYTES);
		if (rc) {
			fprintf(stderr, "kilnctl push: %s: %s\n", path,
				rc == -EFBIG ? "larger than 256 MiB" : strerror(-rc));
			goto out;
		}
		if (pprof_decode(files[i].data, files[i].len, NULL, &p, &err)) {
			fprintf(stderr, "kilnctl push: %s is not a pprof profile: %s\n", path,
				err.msg);
			goto out;
		}
		if (!name)
			name = default_name(p);
		pprof_profile_free(p);
		parca__profilestore__v1alpha1__raw_sample__init(&samples[i]);
		samples[i].raw_profile.data = files[i].data;
		samples[i].raw_profile.len = files[i].len;
		samples_p[i] = &samples[i];
	}

	/* __name__ sorts before every other label name. */
	parca__profilestore__v1alpha1__label__init(&labels.v[0]);
	labels.v[0].name = "__name__";
	labels.v[0].value = (char *)name;
	labels.p[0] = &labels.v[0];
	Parca__Profilestore__V1alpha1__LabelSet set =
	    PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
	set.labels = labels.p;
	set.n_labels = labels.n;
	Parca__Profilestore__V1alpha1__RawProfileSeries series =
	    PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
	series.labels = &set;
	series.samples = samples_p;
	series.n_samples = n_files;
	Parca__Profilestore__V1alpha1__RawProfileSeries *series_p = &series;
	Parca__Profilestore__V1alpha1__WriteRawRequest wr =
	    PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	wr.series = &series_p;
	wr.n_series = 1;
	if (buf_reserve(&req,
			parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&wr))) {
		fprintf(stderr, "kilnctl push: out of memory\n");
		goto out;
	}
	req.len = parca__profilestore__v1alpha1__write_raw_request__pack(&wr, req.data);

	cfg.address = srv.address;
	cfg.insecure = strncmp(srv.address, "https://", 8) != 0;
	cfg.bearer_token = srv.token;
	cfg.tls = srv.tls;
	client = grpc_client_new(&cfg, &err);
	if (!client) {
		fprintf(stderr, "kilnctl push: %s\n", err.msg);
		goto out;
	}
	struct grpc_status st = {0};
	int rc = grpc_client_unary(client, WRITE_RAW, req.data, req.len, &resp, &st);
	if (rc < 0 || st.code != GRPC_STATUS_OK) {
		fprintf(stderr, "kilnctl push: %s refused the profiles (%s): %s\n", srv.address,
			grpc_status_name(st.code), st.message[0] ? st.message : "no message");
		goto out;
	}
	fprintf(stderr, "kilnctl push: wrote %zu profile%s as %s to %s\n", n_files,
		n_files == 1 ? "" : "s", name, srv.address);
	ret = 0;
out:
	grpc_client_free(client);
	for (size_t i = 0; files && i < n_files; i++)
		buf_free(&files[i]);
	free(files);
	free(samples);
	free(samples_p);
	buf_free(&req);
	buf_free(&resp);
	return ret;
}
