/*
 * nsa_metrics.h - Prometheus metrics and health over HTTP ([metrics]
 * listen): a writer of the text exposition format (version 0.0.4) and a
 * small libmicrohttpd server for /metrics, /healthz and /readyz.
 *
 * The server has no thread of its own: the program's main loop waits in
 * nsa_metrics_wait() instead of sleeping, and every request is answered
 * there, on the thread that prints the REPORT line. The program's render
 * and ready callbacks thus read its counters (relaxed atomics) the way
 * the REPORT line does, and a scrape never takes a lock a writer, the
 * subscriber or the fast path takes.
 */
#ifndef NSA_METRICS_H
#define NSA_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An exposition being written: families in order, each with its HELP and
 * TYPE lines and then its samples, every sample with the base labels. */
struct nsa_mx {
	char *buf;
	size_t len, cap;
	int failed; /* out of memory: the scrape answers 500 */
	char base[160]; /* role="...",gateway_id="N" */
};

/* Start an exposition; the buffer is kept between scrapes. */
void nsa_mx_reset(struct nsa_mx *m, const char *role, uint32_t gateway_id);
void nsa_mx_free(struct nsa_mx *m);

/* A family: type is "counter", "gauge" or "histogram". */
void nsa_mx_family(struct nsa_mx *m, const char *name, const char *type,
		   const char *help);

/* One sample of the family just begun: name, value, then label name and
 * value pairs ending with NULL (values escaped here). */
void nsa_mx_sample(struct nsa_mx *m, const char *name, double v, ...);

/* A family of one sample without labels beyond the base ones. */
void nsa_mx_counter(struct nsa_mx *m, const char *name, uint64_t v,
		    const char *help);
void nsa_mx_gauge(struct nsa_mx *m, const char *name, double v,
		  const char *help);

/*
 * A table of metrics read from one struct of uint64_t counters, walked in
 * its order by nsa_mx_table(): a counter or gauge row is a family of one
 * sample; a family row begins a family with one or two label names, and
 * each sample row after it is one sample of it, with the labels' values.
 * A metric added to a table is rendered with nothing else to touch.
 */
struct nsa_mx_row {
	const char *name; /* the family's; NULL: a sample of the one above */
	const char *type; /* "counter" or "gauge" */
	const char *help;
	const char *label[2]; /* a family row's label names (NULL: none) */
	const char *value[2]; /* a sample row's label values */
	size_t off; /* of the value in the struct; NSA_MX_NO_VALUE: none */
};

#define NSA_MX_NO_VALUE ((size_t)-1)

/* Rows of a table. The file defining one sets NSA_MX_STRUCT to the struct
 * its values are in; a value is a uint64_t (any other type is a compile
 * error). One row per line: clang-format would spread each over three. */
/* clang-format off */
#define NSA_MX_AT(f) \
	_Generic(((NSA_MX_STRUCT *)0)->f, uint64_t: offsetof(NSA_MX_STRUCT, f))
#define NSA_MX_COUNTER(f, name, help) \
	{ name, "counter", help, { NULL, NULL }, { NULL, NULL }, NSA_MX_AT(f) }
#define NSA_MX_GAUGE(f, name, help) \
	{ name, "gauge", help, { NULL, NULL }, { NULL, NULL }, NSA_MX_AT(f) }
#define NSA_MX_FAMILY(name, type, label, help) \
	{ name, type, help, { label, NULL }, { NULL, NULL }, NSA_MX_NO_VALUE }
#define NSA_MX_FAMILY2(name, type, label, label2, help) \
	{ name, type, help, { label, label2 }, { NULL, NULL }, NSA_MX_NO_VALUE }
#define NSA_MX_SAMPLE(f, value) \
	{ NULL, NULL, NULL, { NULL, NULL }, { value, NULL }, NSA_MX_AT(f) }
#define NSA_MX_SAMPLE2(f, value, value2) \
	{ NULL, NULL, NULL, { NULL, NULL }, { value, value2 }, NSA_MX_AT(f) }
/* clang-format on */

/* Render the n rows of t with their values read from stats. */
void nsa_mx_table(struct nsa_mx *m, const struct nsa_mx_row *t, size_t n,
		  const void *stats);

/* A histogram family: bucket i holds the observations below le[i]
 * (cumulative counts computed here from per-bucket counts), the
 * observations at or above le[n - 1] are in the +Inf bucket only. _count
 * is the sum of the buckets. */
void nsa_mx_histogram(struct nsa_mx *m, const char *name, const char *help,
		      const double *le, const uint64_t *counts, unsigned int n,
		      uint64_t above, double sum);

/* Append label value v escaped as the format wants (\\, \", \n). */
void nsa_mx_escape(struct nsa_mx *m, const char *v);

/* Parse [metrics] listen: "A.B.C.D:PORT" or "[IPv6]:PORT", port 1..65535.
 * 0 and the address in ss (may be NULL), or -1 with a message naming the
 * key in err. */
int nsa_metrics_parse_listen(const char *listen, struct sockaddr_storage *ss,
			     char *err, size_t errlen);

/* What the server asks the program, on the thread that calls
 * nsa_metrics_wait(). ready: 1, or 0 with the reason in why. */
struct nsa_metrics_hooks {
	void (*render)(void *arg, struct nsa_mx *m);
	int (*ready)(void *arg, char *why, size_t whylen);
	void *arg;
	const char *role; /* the base labels' */
	uint32_t gateway_id;
};

struct nsa_metrics;

/* Listen on addr ([metrics] listen). NULL with
 * "metrics: cannot listen on ADDR:PORT: reason" in err. */
struct nsa_metrics *nsa_metrics_start(const char *addr,
				      const struct nsa_metrics_hooks *hooks,
				      char *err, size_t errlen);

/* Serve what is due, waiting at most ms for requests (m NULL: only
 * wait). The main loop's wait: fd >= 0 is one more socket of the loop's
 * (a control socket); 1 when it is readable, else 0. */
int nsa_metrics_wait(struct nsa_metrics *m, unsigned int ms, int fd);

void nsa_metrics_stop(struct nsa_metrics *m);

/* Requests served, for tests and the docs' cost figures. */
uint64_t nsa_metrics_requests(const struct nsa_metrics *m);

#endif
