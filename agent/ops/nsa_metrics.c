/*
 * nsa_metrics.c - the Prometheus text exposition writer and the HTTP server
 * of /metrics, /healthz and /readyz (nsa_metrics.h).
 *
 * libmicrohttpd runs without threads of its own ("external select"): the
 * program's main loop calls nsa_metrics_wait(), which waits on the
 * server's sockets instead of sleeping and answers whatever is ready. A
 * request is answered from memory at once (the render callback reads
 * relaxed atomics), so a slow client only holds its own socket and never
 * the loop. Few connections are accepted at a time and idle ones are
 * closed: a scraper or a health check needs one.
 *
 * What it does not do: TLS, authentication (listen on loopback or a
 * management network), compression.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <microhttpd.h>

#include "nsa_metrics.h"
#include "nsdp_time.h"

#define METRICS_MAX_CONNECTIONS 16
#define METRICS_CONNECTION_TIMEOUT_S 10
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- the exposition ---------------------------------------------------- */

static void mx_grow(struct nsa_mx *m, size_t more)
{
	size_t cap;
	char *p;

	if (m->failed || m->len + more + 1 <= m->cap)
		return;
	cap = m->cap ? m->cap : 16384;
	while (cap < m->len + more + 1)
		cap *= 2;
	p = realloc(m->buf, cap);
	if (p == NULL) {
		m->failed = 1;
		return;
	}
	m->buf = p;
	m->cap = cap;
}

static void mx_put(struct nsa_mx *m, const char *s, size_t n)
{
	mx_grow(m, n);
	if (m->failed)
		return;
	memcpy(m->buf + m->len, s, n);
	m->len += n;
	m->buf[m->len] = 0;
}

static void mx_puts(struct nsa_mx *m, const char *s)
{
	mx_put(m, s, strlen(s));
}

static void mx_printf(struct nsa_mx *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void mx_printf(struct nsa_mx *m, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		mx_put(m, tmp,
		       (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void nsa_mx_reset(struct nsa_mx *m, const char *role, uint32_t gateway_id)
{
	m->len = 0;
	m->failed = 0;
	if (m->buf)
		m->buf[0] = 0;
	snprintf(m->base, sizeof(m->base), "role=\"%s\",gateway_id=\"%u\"",
		 role, gateway_id);
}

void nsa_mx_free(struct nsa_mx *m)
{
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

void nsa_mx_escape(struct nsa_mx *m, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			mx_puts(m, "\\\\");
		else if (*v == '"')
			mx_puts(m, "\\\"");
		else if (*v == '\n')
			mx_puts(m, "\\n");
		else
			mx_put(m, v, 1);
	}
}

/* HELP text escapes only \ and newline. */
static void mx_help(struct nsa_mx *m, const char *help)
{
	for (; *help; help++) {
		if (*help == '\\')
			mx_puts(m, "\\\\");
		else if (*help == '\n')
			mx_puts(m, "\\n");
		else
			mx_put(m, help, 1);
	}
}

void nsa_mx_family(struct nsa_mx *m, const char *name, const char *type,
		   const char *help)
{
	mx_printf(m, "# HELP %s ", name);
	mx_help(m, help);
	mx_printf(m, "\n# TYPE %s %s\n", name, type);
}

static void mx_value(struct nsa_mx *m, double v)
{
	if (isinf(v))
		mx_puts(m, v > 0 ? "+Inf" : "-Inf");
	else if (isnan(v))
		mx_puts(m, "NaN");
	else if (v == (double)(int64_t)v && fabs(v) < 9e15)
		mx_printf(m, "%lld", (long long)v);
	else
		mx_printf(m, "%.17g", v);
}

static void mx_vsample(struct nsa_mx *m, const char *name, double v, va_list ap)
{
	const char *k;

	mx_printf(m, "%s{%s", name, m->base);
	while ((k = va_arg(ap, const char *)) != NULL) {
		const char *val = va_arg(ap, const char *);

		mx_printf(m, ",%s=\"", k);
		nsa_mx_escape(m, val);
		mx_puts(m, "\"");
	}
	mx_puts(m, "} ");
	mx_value(m, v);
	mx_puts(m, "\n");
}

void nsa_mx_sample(struct nsa_mx *m, const char *name, double v, ...)
{
	va_list ap;

	va_start(ap, v);
	mx_vsample(m, name, v, ap);
	va_end(ap);
}

void nsa_mx_counter(struct nsa_mx *m, const char *name, uint64_t v,
		    const char *help)
{
	nsa_mx_family(m, name, "counter", help);
	nsa_mx_sample(m, name, (double)v, NULL);
}

void nsa_mx_gauge(struct nsa_mx *m, const char *name, double v,
		  const char *help)
{
	nsa_mx_family(m, name, "gauge", help);
	nsa_mx_sample(m, name, v, NULL);
}

void nsa_mx_table(struct nsa_mx *m, const struct nsa_mx_row *t, size_t n,
		  const void *stats)
{
	const struct nsa_mx_row *family = NULL;
	uint64_t v;
	size_t i;

	for (i = 0; i < n; i++) {
		if (t[i].name) {
			family = &t[i];
			nsa_mx_family(m, t[i].name, t[i].type, t[i].help);
		}
		if (t[i].off == NSA_MX_NO_VALUE || family == NULL)
			continue;
		memcpy(&v, (const char *)stats + t[i].off, sizeof(v));
		if (t[i].name || family->label[0] == NULL)
			nsa_mx_sample(m, family->name, (double)v, NULL);
		else
			nsa_mx_sample(m, family->name, (double)v,
				      family->label[0], t[i].value[0],
				      family->label[1], t[i].value[1], NULL);
	}
}

void nsa_mx_histogram(struct nsa_mx *m, const char *name, const char *help,
		      const double *le, const uint64_t *counts, unsigned int n,
		      uint64_t above, double sum)
{
	char sample[128], bound[32];
	uint64_t cum = 0;
	unsigned int i;

	nsa_mx_family(m, name, "histogram", help);
	snprintf(sample, sizeof(sample), "%s_bucket", name);
	for (i = 0; i < n; i++) {
		cum += counts[i];
		snprintf(bound, sizeof(bound), "%.9g", le[i]);
		nsa_mx_sample(m, sample, (double)cum, "le", bound, NULL);
	}
	cum += above;
	nsa_mx_sample(m, sample, (double)cum, "le", "+Inf", NULL);
	snprintf(sample, sizeof(sample), "%s_sum", name);
	nsa_mx_sample(m, sample, sum, NULL);
	snprintf(sample, sizeof(sample), "%s_count", name);
	nsa_mx_sample(m, sample, (double)cum, NULL);
}

/* ---- [metrics] listen -------------------------------------------------- */

int nsa_metrics_parse_listen(const char *listen, struct sockaddr_storage *ss,
			     char *err, size_t errlen)
{
	struct sockaddr_storage tmp;
	char host[64];
	const char *port_s;
	unsigned long port;
	char *end;
	size_t hl;

	if (ss == NULL)
		ss = &tmp;
	memset(ss, 0, sizeof(*ss));
	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');

		if (close == NULL || close[1] != ':')
			goto bad;
		hl = (size_t)(close - listen - 1);
		port_s = close + 2;
		if (hl == 0 || hl >= sizeof(host))
			goto bad;
		memcpy(host, listen + 1, hl);
	} else {
		const char *colon = strrchr(listen, ':');

		if (colon == NULL || strchr(listen, ':') != colon)
			goto bad;
		hl = (size_t)(colon - listen);
		port_s = colon + 1;
		if (hl == 0 || hl >= sizeof(host))
			goto bad;
		memcpy(host, listen, hl);
	}
	host[hl] = 0;
	if (port_s[0] < '0' || port_s[0] > '9')
		goto bad;
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (*end != 0 || errno != 0 || port == 0 || port > 65535) {
		snprintf(err, errlen,
			 "[metrics] listen: port of '%s' must be 1..65535",
			 listen);
		return -1;
	}
	if (listen[0] == '[') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			goto bad;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto bad;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
	}
	return 0;
bad:
	snprintf(err, errlen,
		 "[metrics] listen: '%s' is not ADDR:PORT (IPv4) or "
		 "[ADDR]:PORT (IPv6)",
		 listen);
	return -1;
}

/* ---- the server -------------------------------------------------------- */

struct nsa_metrics {
	struct MHD_Daemon *d;
	int fd;
	struct nsa_metrics_hooks hooks;
	struct nsa_mx mx;
	uint64_t requests;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
			     const char *type, const char *body, size_t len,
			     const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	/* Health answers must be fresh for whoever asks. */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int status,
				  const char *text, const char *allow)
{
	return reply(c, status, "text/plain; charset=utf-8", text, strlen(text),
		     allow);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	struct nsa_metrics *m = cls;
	int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		  strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	int known = strcmp(url, "/metrics") == 0 ||
		    strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0;
	char why[256], body[300];

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	m->requests++;
	if (!known)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
	if (!get)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "method not allowed\n", "GET, HEAD");
	if (strcmp(url, "/healthz") == 0)
		return reply_text(c, MHD_HTTP_OK, "ok\n", NULL);
	if (strcmp(url, "/readyz") == 0) {
		why[0] = 0;
		if (m->hooks.ready(m->hooks.arg, why, sizeof(why)))
			return reply_text(c, MHD_HTTP_OK, "ready\n", NULL);
		snprintf(body, sizeof(body), "not ready: %s\n", why);
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, body, NULL);
	}
	nsa_mx_reset(&m->mx, m->hooks.role, m->hooks.gateway_id);
	m->hooks.render(m->hooks.arg, &m->mx);
	if (m->mx.failed)
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				  "out of memory\n", NULL);
	return reply(c, MHD_HTTP_OK, METRICS_CONTENT_TYPE, m->mx.buf, m->mx.len,
		     NULL);
}

struct nsa_metrics *nsa_metrics_start(const char *addr,
				      const struct nsa_metrics_hooks *hooks,
				      char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct nsa_metrics *m;
	int one = 1;
	socklen_t sl;

	if (nsa_metrics_parse_listen(addr, &ss, err, errlen) != 0)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "metrics: out of memory");
		return NULL;
	}
	m->hooks = *hooks;
	sl = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
				      : sizeof(struct sockaddr_in);
	/* Our own socket, so that a port in use is told as such. */
	m->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0);
	if (m->fd < 0 ||
	    setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(m->fd, (struct sockaddr *)&ss, sl) != 0 ||
	    listen(m->fd, 16) != 0) {
		snprintf(err, errlen, "metrics: cannot listen on %s: %s", addr,
			 strerror(errno));
		goto fail;
	}
	m->d = MHD_start_daemon(
		MHD_NO_FLAG, 0, NULL, NULL, on_request, m,
		MHD_OPTION_LISTEN_SOCKET, m->fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)METRICS_MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)METRICS_CONNECTION_TIMEOUT_S, MHD_OPTION_END);
	if (m->d == NULL) {
		snprintf(err, errlen,
			 "metrics: cannot listen on %s: the HTTP server did "
			 "not start",
			 addr);
		goto fail;
	}
	return m;
fail:
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	return NULL;
}

int nsa_metrics_wait(struct nsa_metrics *m, unsigned int ms, int fd)
{
	fd_set rs, ws, es;
	MHD_socket max = 0;
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	struct timeval tv;
	int mhd = m != NULL, n;

	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	if (mhd && MHD_get_fdset(m->d, &rs, &ws, &es, &max) != MHD_YES) {
		mhd = 0;
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&es);
		max = 0;
	}
	if (mhd && MHD_get_timeout(m->d, &mhd_ms) == MHD_YES && mhd_ms < ms)
		ms = (unsigned int)mhd_ms;
	if (!mhd || fd >= FD_SETSIZE) {
		/* No server, or a descriptor select cannot take (above
		 * FD_SETSIZE): wait for the loop's own socket alone and serve
		 * what the server has without waiting for it. */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		if (m != NULL)
			MHD_run(m->d);
		if (fd < 0) {
			nsdp_sleep_ms(ms);
			return 0;
		}
		return poll(&pfd, 1, (int)ms) > 0;
	}
	if (fd >= 0) {
		FD_SET(fd, &rs);
		if (fd > max)
			max = fd;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	n = select(max + 1, &rs, &ws, &es, &tv);
	if (n < 0) {
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&es);
	}
	if (mhd)
		MHD_run_from_select(m->d, &rs, &ws, &es);
	return fd >= 0 && n > 0 && FD_ISSET(fd, &rs);
}

void nsa_metrics_stop(struct nsa_metrics *m)
{
	if (m == NULL)
		return;
	MHD_stop_daemon(m->d);
	close(m->fd);
	nsa_mx_free(&m->mx);
	free(m);
}

uint64_t nsa_metrics_requests(const struct nsa_metrics *m)
{
	return m ? m->requests : 0;
}
