/*
 * lazylibs.c — libcurl and libmicrohttpd for kiln-agent, opened on first use.
 *
 * The agent starts on every host and is measured against `perf record`,
 * start-up included. Linked normally, these two libraries bring ~30 shared
 * objects (gnutls, OpenSSL, Kerberos, LDAP, ssh2, ...) whose loading,
 * relocation and constructors cost ~20 ms of CPU at every start, before
 * main, even when neither the push sink (curl) nor /metrics (microhttpd) is
 * in use. So the agent is linked with these stubs instead of -lcurl and
 * -lmicrohttpd (mk/agent.mk): each stub opens its library on the first call
 * (once, thread-safe) and forwards. The other binaries link the libraries
 * as usual; this file is not in libkiln.a.
 *
 * Only the functions the agent's objects call are here: a link error names
 * any new one. If a library cannot be opened, the stubs fail the way the
 * library reports failure (NULL handle, CURLE_FAILED_INIT), after one
 * message that names the library, so the callers' error paths apply.
 */
#define CURL_DISABLE_TYPECHECK /* curl_easy_setopt must stay a function */
#include <curl/curl.h>
#include <microhttpd.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

/* The sonames the agent is built against (curl's has been 4 since 2006,
 * microhttpd's 12 since 2014). */
#define CURL_SONAME "libcurl.so.4"
#define MHD_SONAME  "libmicrohttpd.so.12"

#define STUB(fn) static __typeof__(fn) *p_##fn

STUB(curl_global_init);
STUB(curl_easy_init);
STUB(curl_easy_setopt);
STUB(curl_easy_perform);
STUB(curl_easy_cleanup);
STUB(curl_easy_strerror);
STUB(curl_slist_append);
STUB(curl_slist_free_all);

STUB(MHD_start_daemon_va);
STUB(MHD_stop_daemon);
STUB(MHD_create_response_from_buffer);
STUB(MHD_queue_response);
STUB(MHD_destroy_response);
STUB(MHD_add_response_header);

static pthread_once_t curl_once = PTHREAD_ONCE_INIT, mhd_once = PTHREAD_ONCE_INIT;
static int curl_ok, mhd_ok; /* written once under pthread_once */

struct slot {
	const char *name;
	void **ptr;
};
#define SLOT(fn)                                                                                   \
	{                                                                                          \
#fn, (void **)&p_##fn                                                              \
	}

/* Opens soname and resolves every slot, or none: a half-resolved library
 * is not usable. The library stays open for the process's life. */
static int open_slots(const char *soname, const struct slot *s, size_t n)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL), *vals[16];

	if (!h) {
		log_error("%s cannot be loaded (%s): install it to use this feature", soname,
			  dlerror());
		return 0;
	}
	for (size_t i = 0; i < n && i < 16; i++) {
		vals[i] = dlsym(h, s[i].name);
		if (!vals[i]) {
			log_error("%s has no %s: %s", soname, s[i].name, dlerror());
			dlclose(h);
			return 0;
		}
	}
	for (size_t i = 0; i < n && i < 16; i++)
		*s[i].ptr = vals[i];
	return 1;
}

static void curl_open(void)
{
	static const struct slot s[] = {
	    SLOT(curl_global_init),  SLOT(curl_easy_init),	SLOT(curl_easy_setopt),
	    SLOT(curl_easy_perform), SLOT(curl_easy_cleanup),	SLOT(curl_easy_strerror),
	    SLOT(curl_slist_append), SLOT(curl_slist_free_all),
	};

	curl_ok = open_slots(CURL_SONAME, s, sizeof(s) / sizeof(s[0]));
}

static void mhd_open(void)
{
	static const struct slot s[] = {
	    SLOT(MHD_start_daemon_va),
	    SLOT(MHD_stop_daemon),
	    SLOT(MHD_create_response_from_buffer),
	    SLOT(MHD_queue_response),
	    SLOT(MHD_destroy_response),
	    SLOT(MHD_add_response_header),
	};

	mhd_ok = open_slots(MHD_SONAME, s, sizeof(s) / sizeof(s[0]));
}

static int have_curl(void)
{
	pthread_once(&curl_once, curl_open);
	return curl_ok;
}

static int have_mhd(void)
{
	pthread_once(&mhd_once, mhd_open);
	return mhd_ok;
}

/* ---- libcurl -------------------------------------------------------------- */

CURLcode curl_global_init(long flags)
{
	return have_curl() ? p_curl_global_init(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
	return have_curl() ? p_curl_easy_init() : NULL;
}

/* The option's number says the type of its one argument (curl.h's
 * CURLOPTTYPE_* ranges), which is how curl itself reads it. */
CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
	va_list ap;
	CURLcode rc;

	if (!have_curl())
		return CURLE_FAILED_INIT;
	va_start(ap, option);
	if (option < CURLOPTTYPE_OBJECTPOINT)
		rc = p_curl_easy_setopt(curl, option, va_arg(ap, long));
	else if (option < CURLOPTTYPE_OFF_T) /* data and function pointers */
		rc = p_curl_easy_setopt(curl, option, va_arg(ap, void *));
	else if (option < CURLOPTTYPE_BLOB)
		rc = p_curl_easy_setopt(curl, option, va_arg(ap, curl_off_t));
	else
		rc = p_curl_easy_setopt(curl, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode curl_easy_perform(CURL *curl)
{
	return have_curl() ? p_curl_easy_perform(curl) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL *curl)
{
	if (have_curl())
		p_curl_easy_cleanup(curl);
}

const char *curl_easy_strerror(CURLcode code)
{
	return have_curl() ? p_curl_easy_strerror(code) : "libcurl not loaded";
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *data)
{
	return have_curl() ? p_curl_slist_append(list, data) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
	if (have_curl())
		p_curl_slist_free_all(list);
}

/* ---- libmicrohttpd ---------------------------------------------------------- */

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	if (!have_mhd())
		return NULL;
	va_start(ap, dh_cls);
	d = p_MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	if (have_mhd())
		p_MHD_stop_daemon(daemon);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
						     enum MHD_ResponseMemoryMode mode)
{
	return have_mhd() ? p_MHD_create_response_from_buffer(size, buffer, mode) : NULL;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
				   struct MHD_Response *response)
{
	return have_mhd() ? p_MHD_queue_response(connection, status_code, response) : MHD_NO;
}

void MHD_destroy_response(struct MHD_Response *response)
{
	if (have_mhd())
		p_MHD_destroy_response(response);
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header,
					const char *content)
{
	return have_mhd() ? p_MHD_add_response_header(response, header, content) : MHD_NO;
}
