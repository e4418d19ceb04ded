/*
 * http_basic.c — the endpoints that are not the profile API: /healthy,
 * /ready, /metrics, the static web UI.
 *
 * The UI is a built single-page app: files under --ui-path are served with
 * their content type; any other path that is not under /api/ gets
 * index.html, so client-side routes survive a reload. A file named by the
 * request is served only if it resolves to a regular file inside --ui-path
 * (fd_open_under: no "..", no link leading out, never a FIFO).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fdio.h"
#include "server/handlers.h"
#include "server/internal.h"

void rpc_unimplemented(struct grpc_call *c)
{
	grpc_fail(c, GRPC_STATUS_UNIMPLEMENTED, "not implemented by kiln");
}

void http_healthy(const struct http_request *req, struct http_response *resp)
{
	buf_append_str(&resp->body, "ok\n");
}

void http_ready(const struct http_request *req, struct http_response *resp)
{
	if (atomic_load(&req->srv->ready) && !server_stopping(req->srv)) {
		buf_append_str(&resp->body, "ready\n");
	} else {
		resp->status = 503;
		buf_append_str(&resp->body, "not ready\n");
	}
}

void http_metrics(const struct http_request *req, struct http_response *resp)
{
	resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
	metrics_render(req->srv, &resp->body);
}

static const char *content_type_for(const char *path)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".html", "text/html; charset=utf-8"},
	    {".js", "text/javascript; charset=utf-8"},
	    {".mjs", "text/javascript; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},
	    {".json", "application/json"},
	    {".map", "application/json"},
	    {".svg", "image/svg+xml"},
	    {".png", "image/png"},
	    {".jpg", "image/jpeg"},
	    {".ico", "image/x-icon"},
	    {".woff", "font/woff"},
	    {".woff2", "font/woff2"},
	    {".ttf", "font/ttf"},
	    {".txt", "text/plain; charset=utf-8"},
	    {".wasm", "application/wasm"},
	    {".webmanifest", "application/manifest+json"},
	};
	const char *dot = strrchr(path, '.');
	const char *slash = strrchr(path, '/');
	if (dot && (!slash || dot > slash))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (strcmp(dot, types[i].ext) == 0)
				return types[i].type;
	return "application/octet-stream";
}

static bool is_regular_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void http_ui(const struct http_request *req, struct http_response *resp)
{
	const char *root = server_config(req->srv)->ui_path;
	char path[4096];

	if (strncmp(req->path, "/api/", 5) == 0) {
		http_error(resp, 404, -1, "no API route %s", req->path);
		return;
	}
	snprintf(path, sizeof(path), "%s/index.html", root ? root : "");
	if (!root || !is_regular_file(path)) {
		resp->status = strcmp(req->path, "/") == 0 ? 200 : 404;
		buf_append_str(
		    &resp->body,
		    "Kiln is running, but the web UI is not built.\n"
		    "Build it with `make ui` (it lands in build/ui), or point\n"
		    "--ui-path at a directory holding the built index.html.\n"
		    "The API is at /api/v1/... (see docs/API.md); metrics at /metrics.\n");
		return;
	}
	/* Never leave the UI directory. */
	bool traversal = strstr(req->path, "/..") != NULL || strchr(req->path, '\\') != NULL;
	const char *file = path; /* index.html unless the request names a file */
	char want[4096], root_real[PATH_MAX], resolved[PATH_MAX];
	if (!traversal && strcmp(req->path, "/") != 0 && realpath(root, root_real)) {
		snprintf(want, sizeof(want), "%s%s", root, req->path);
		int fd = fd_open_under(root_real, want, resolved, NULL);
		if (fd >= 0) {
			close(fd);
			file = resolved;
		}
	}
	if (buf_read_file(&resp->body, file, 256u << 20) != 0) {
		http_error(resp, 500, -1, "cannot read %s", file);
		return;
	}
	resp->content_type = content_type_for(file);
}
