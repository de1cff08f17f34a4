/*
 * nsa_config.c - the agent's configuration: defaults, the INI file, the
 * --set overrides, the final consistency checks, the printout and the
 * Markdown reference, all by walking the key tables.
 *
 * A configuration knows two tables: the agent's (nsa_config_keys) and,
 * optionally, a program's own (c->extra, e.g. natsync-gateway's
 * [gateway]), whose offsets count from c in the program's larger struct.
 * Sections print in table order; an unknown section or key is refused
 * with the list of the known ones.
 *
 * Invariants: the first error stops the load and is the one reported, as
 * "FILE:LINE: [section] key: reason"; a key given twice in one file is an
 * error rather than a silent "last one wins"; the printout always loads
 * back to the same configuration.
 *
 * Not done here: nothing is connected, allocated or started; the password
 * itself never comes from the INI file (only from password_file, read in
 * nsa_config_finish) and is never printed. Not thread-safe; call it before
 * starting threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "nsa_config.h"
#include "nsa_metrics.h"
#include "nsa_config_key.h"
#include "nsa_log.h"

#define NSA_MAX_TABLES 2

/* The tables c knows, the agent's first; returns how many. */
static size_t nsa_tables(const struct nsa_config *c,
			 const struct nsa_key_table *t[NSA_MAX_TABLES])
{
	t[0] = &nsa_config_keys;
	t[1] = c->extra;
	return c->extra ? 2 : 1;
}

static void nsa_list_sections(const struct nsa_config *c, char *buf, size_t len)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables = nsa_tables(c, t), n = 0;
	const char *last = NULL;

	buf[0] = '\0';
	for (size_t j = 0; j < n_tables; j++) {
		for (size_t i = 0; i < t[j]->n_keys && n < len; i++) {
			const char *section = t[j]->keys[i].section;

			if (last && strcmp(last, section) == 0)
				continue;
			n += (size_t)snprintf(buf + n, len - n, "%s[%s]",
					      last ? ", " : "", section);
			last = section;
		}
	}
}

static void nsa_list_keys(const struct nsa_config *c, const char *section,
			  char *buf, size_t len)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables = nsa_tables(c, t), n = 0;

	buf[0] = '\0';
	for (size_t j = 0; j < n_tables; j++)
		for (size_t i = 0; i < t[j]->n_keys && n < len; i++)
			if (strcmp(t[j]->keys[i].section, section) == 0)
				n += (size_t)snprintf(buf + n, len - n, "%s%s",
						      n ? ", " : "",
						      t[j]->keys[i].key);
}

/* section.key, or NULL with the reason in why. *index numbers the keys of
 * both tables, for the loader's "given twice". */
static const struct nsa_key *nsa_key_find(const struct nsa_config *c,
					  const char *section, const char *key,
					  size_t *index, char *why,
					  size_t whylen)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables = nsa_tables(c, t), base = 0;
	char known[512];
	int section_known = 0;

	for (size_t j = 0; j < n_tables; base += t[j]->n_keys, j++) {
		for (size_t i = 0; i < t[j]->n_keys; i++) {
			const struct nsa_key *k = &t[j]->keys[i];

			if (strcmp(k->section, section) != 0)
				continue;
			section_known = 1;
			if (strcmp(k->key, key) == 0) {
				*index = base + i;
				return k;
			}
		}
	}
	if (!section_known) {
		nsa_list_sections(c, known, sizeof(known));
		snprintf(why, whylen, "unknown section (known: %s)", known);
	} else {
		nsa_list_keys(c, section, known, sizeof(known));
		snprintf(why, whylen, "unknown key (known: %s)", known);
	}
	return NULL;
}

static void nsa_config_derive(struct nsa_config *c)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables = nsa_tables(c, t);

	for (size_t j = 0; j < n_tables; j++)
		if (t[j]->derive)
			t[j]->derive(c);
}

void nsa_config_defaults_ext(struct nsa_config *c,
			     const struct nsa_key_table *extra)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables;
	char why[256];

	memset(c, 0, extra ? extra->size : sizeof(*c));
	c->extra = extra;
	n_tables = nsa_tables(c, t);
	for (size_t j = 0; j < n_tables; j++) {
		for (size_t i = 0; i < t[j]->n_keys; i++) {
			const struct nsa_key *k = &t[j]->keys[i];

			/* Constants: test_config checks that they parse. */
			if (nsa_key_parse(k, c, k->def, why, sizeof(why)) != 0)
				NSA_ERR("config default [%s] %s: %s",
					k->section, k->key, why);
		}
	}
	nsa_config_derive(c);
}

void nsa_config_defaults(struct nsa_config *c)
{
	nsa_config_defaults_ext(c, NULL);
}

/* State of one nsa_config_load: the file is read through nsa_load_line so
 * that the handler knows the line number (inih passes none unless built
 * with INI_HANDLER_LINENO) and so that an over-long line is an error rather
 * than silently split in two. */
struct nsa_load {
	struct nsa_config *c;
	const char *path;
	FILE *f;
	int line;
	int failed_line; /* 0 while no error */
	int *seen; /* per key: the line it was set on, 0 if not yet */
	char *err;
	size_t errlen;
};

static char *nsa_load_line(char *str, int num, void *stream)
{
	struct nsa_load *ld = stream;
	size_t n = 0, lead;
	int ch = EOF;

	if (ld->failed_line)
		return NULL;
	/* getc, not fgets: with fgets a NUL byte hides where the line ends,
	 * and a long line would be split in two after all. */
	while (n + 1 < (size_t)num && (ch = getc(ld->f)) != EOF) {
		if (ch == '\0') {
			ld->failed_line = ++ld->line;
			snprintf(ld->err, ld->errlen,
				 "%s:%d: line holds a NUL byte", ld->path,
				 ld->line);
			return NULL;
		}
		str[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (n == 0)
		return NULL;
	str[n] = '\0';
	ld->line++;
	if (str[n - 1] != '\n' && (ch = getc(ld->f)) != EOF) {
		ungetc(ch, ld->f);
		ld->failed_line = ld->line;
		snprintf(ld->err, ld->errlen,
			 "%s:%d: line is longer than %d characters", ld->path,
			 ld->line, num - 3);
		return NULL;
	}
	/* inih takes an indented line for the continuation of the previous
	 * value; here indentation is only layout, so keys may be indented. */
	lead = strspn(str, " \t");
	memmove(str, str + lead, n - lead + 1);
	return str;
}

static int nsa_load_entry(void *user, const char *section, const char *key,
			  const char *value)
{
	struct nsa_load *ld = user;
	const struct nsa_key *k;
	char why[768];
	size_t i = 0;

	if (ld->failed_line)
		return 0;
	k = nsa_key_find(ld->c, section, key, &i, why, sizeof(why));
	if (k && ld->seen[i]) {
		snprintf(why, sizeof(why), "given twice (first on line %d)",
			 ld->seen[i]);
		k = NULL;
	}
	if (k && nsa_key_parse(k, ld->c, value, why, sizeof(why)) != 0)
		k = NULL;
	if (!k) {
		ld->failed_line = ld->line;
		snprintf(ld->err, ld->errlen, "%s:%d: [%s] %s: %s", ld->path,
			 ld->line, section, key, why);
		return 0;
	}
	ld->seen[i] = ld->line;
	return 1;
}

int nsa_config_load(struct nsa_config *c, const char *path, char *err,
		    size_t errlen)
{
	struct nsa_load ld = {
		.c = c, .path = path, .err = err, .errlen = errlen};
	int rc;

	ld.seen = calloc(nsa_config_keys.n_keys +
				 (c->extra ? c->extra->n_keys : 0),
			 sizeof(*ld.seen));
	ld.f = fopen(path, "r");
	if (!ld.seen || !ld.f) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		free(ld.seen);
		if (ld.f)
			fclose(ld.f);
		return -1;
	}
	rc = ini_parse_stream(nsa_load_line, &ld, nsa_load_entry, &ld);
	fclose(ld.f);
	free(ld.seen);
	/* inih reports a malformed line only through its return value, the
	 * first bad line; it wins when it comes before the handler's error. */
	if (rc > 0 && (!ld.failed_line || rc < ld.failed_line)) {
		snprintf(err, errlen,
			 "%s:%d: malformed line (expected [section] or key = "
			 "value)",
			 path, rc);
		return -1;
	}
	if (rc < 0 && !ld.failed_line) {
		snprintf(err, errlen, "%s: cannot parse (inih error %d)", path,
			 rc);
		return -1;
	}
	return ld.failed_line ? -1 : 0;
}

static char *nsa_trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

int nsa_config_set(struct nsa_config *c, const char *assignment, char *err,
		   size_t errlen)
{
	char buf[2048], why[768];
	char *eq, *dot, *section, *key, *value;
	const struct nsa_key *k;
	size_t i;

	if (strlen(assignment) >= sizeof(buf)) {
		snprintf(err, errlen, "--set: longer than %zu bytes",
			 sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, assignment);
	eq = strchr(buf, '=');
	dot = strchr(buf, '.');
	if (!eq || !dot || dot > eq) {
		snprintf(err, errlen, "--set %s: expected section.key=value",
			 assignment);
		return -1;
	}
	*eq = '\0';
	*dot = '\0';
	section = nsa_trim(buf);
	key = nsa_trim(dot + 1);
	value = nsa_trim(eq + 1);
	k = nsa_key_find(c, section, key, &i, why, sizeof(why));
	if (!k || nsa_key_parse(k, c, value, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "--set %s.%s: %s", section, key, why);
		return -1;
	}
	return 0;
}

/* Read a secret (the store password, the batch key) from the file at path
 * into buf: refuse a file others may read, and keep only the one line it
 * must hold. name is the key for messages, e.g. "password_file". The
 * length goes to *len. */
static int nsa_read_secret(const char *name, const char *path, char *buf,
			   size_t cap, size_t *len, char *err, size_t errlen)
{
	size_t n = 0;
	struct stat st;
	ssize_t r;
	int fd;

	/* O_NONBLOCK: a FIFO must not hang the start; fstat refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: cannot open: %s", name, path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s %s: cannot stat: %s", name, path,
			 strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", name, path);
		goto fail;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen,
			 "%s %s: permissions %04o let others read it; chmod "
			 "600",
			 name, path, (unsigned int)(st.st_mode & 07777));
		goto fail;
	}
	memset(buf, 0, cap);
	while (n < cap && (r = read(fd, buf + n, cap - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s %s: cannot read: %s", name,
				 path, strerror(errno));
			goto fail;
		}
		n += (size_t)r;
	}
	if (n == cap) {
		snprintf(err, errlen, "%s %s: longer than %zu bytes", name,
			 path, cap - 1);
		goto fail;
	}
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n == 0) {
		snprintf(err, errlen, "%s %s: empty", name, path);
		goto fail;
	}
	if (memchr(buf, '\0', n) || memchr(buf, '\n', n)) {
		snprintf(err, errlen, "%s %s: must hold one line of text", name,
			 path);
		goto fail;
	}
	close(fd);
	*len = n;
	return 0;
fail:
	memset(buf, 0, cap);
	close(fd);
	return -1;
}

int nsa_config_finish(struct nsa_config *c, char *err, size_t errlen)
{
	size_t len;

	if (c->store.n_seeds == 0) {
		snprintf(err, errlen, "[store] seeds: no seed address given");
		return -1;
	}
	if (c->role == NSA_ROLE_ACTIVE && c->workers > c->lanes) {
		snprintf(err, errlen,
			 "[active] workers (%u) exceeds [rings] lanes (%u)",
			 c->workers, c->lanes);
		return -1;
	}
	if (strcmp(c->writer_cpus, "auto") != 0 &&
	    strcmp(c->writer_cpus, "all") != 0) {
		cpu_set_t set;
		char why[160];

		if (nsa_cpu_list_parse(c->writer_cpus, &set, why,
				       sizeof(why)) != 0) {
			snprintf(err, errlen, "[active] writer_cpus: %s", why);
			return -1;
		}
	}
	if (c->password_file[0] &&
	    nsa_read_secret("password_file", c->password_file,
			    c->store.password, sizeof(c->store.password), &len,
			    err, errlen) != 0)
		return -1;
	c->batch_key_len = 0;
	if (c->batch_key_file[0] &&
	    nsa_read_secret("batch_key_file", c->batch_key_file, c->batch_key,
			    sizeof(c->batch_key), &c->batch_key_len, err,
			    errlen) != 0)
		return -1;
	if (c->metrics_listen[0] &&
	    nsa_metrics_parse_listen(c->metrics_listen, NULL, err, errlen) != 0)
		return -1;
	nsa_config_derive(c);
	return 0;
}

void nsa_config_print(const struct nsa_config *c, FILE *out)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES];
	size_t n_tables = nsa_tables(c, t);
	const char *section = NULL;

	fputs("; natsync effective configuration (password not shown)\n", out);
	for (size_t j = 0; j < n_tables; j++) {
		for (size_t i = 0; i < t[j]->n_keys; i++) {
			const struct nsa_key *k = &t[j]->keys[i];

			if (!section || strcmp(section, k->section) != 0) {
				fprintf(out, "%s[%s]\n", section ? "\n" : "",
					k->section);
				section = k->section;
			}
			/* "key =" alone for an empty value, no trailing
			 * blank. */
			if (nsa_key_is_empty(k, c)) {
				fprintf(out, "%s =\n", k->key);
				continue;
			}
			fprintf(out, "%s = ", k->key);
			nsa_key_print(k, c, out);
			fputc('\n', out);
		}
	}
}

/* One Markdown table per section: key, default, accepted values, help. */
void nsa_config_reference(const struct nsa_key_table *extra, FILE *out)
{
	const struct nsa_key_table *t[NSA_MAX_TABLES] = {&nsa_config_keys,
							 extra};
	const char *section = NULL;
	char values[256];

	fputs(NSA_CONFIG_REFERENCE_MARKER "\n", out);
	for (size_t j = 0; j < NSA_MAX_TABLES && t[j]; j++) {
		for (size_t i = 0; i < t[j]->n_keys; i++) {
			const struct nsa_key *k = &t[j]->keys[i];

			if (!section || strcmp(section, k->section) != 0) {
				fprintf(out,
					"\n## [%s]\n\n"
					"| key | default | values | meaning |\n"
					"| --- | --- | --- | --- |\n",
					k->section);
				section = k->section;
			}
			nsa_key_describe(k, values, sizeof(values));
			fprintf(out, "| `%s` | ", k->key);
			if (k->def[0])
				fprintf(out, "`%s`", k->def);
			else
				fputs("*(empty)*", out);
			fprintf(out, " | %s | %s |\n", values, k->help);
		}
	}
}
