/*
 * fuzz_config.c - libFuzzer target: the agent's configuration parser, as
 * an operator's mistakes and a hostile file reach it.
 *
 * Each input is used three ways:
 * - as an INI file, loaded with nsa_config_load over the defaults from a
 *   memory-backed file (memfd, opened by its /proc/self/fd path, so the
 *   real fopen/fgets path runs). A refusal names the file and a line that
 *   exists; an accepted file prints (nsa_config_print) to text that loads
 *   back to the identical configuration, and loading is deterministic.
 * - line by line as --set assignments (nsa_config_set) over the defaults:
 *   a refused assignment leaves the configuration byte for byte as it
 *   was; the configuration the accepted ones build prints and loads back
 *   identically, as nsa_config.c promises.
 * - as the content of a password file and of a batch key file (mode
 *   0600): nsa_config_finish accepts it exactly when it is one line of
 *   text that fits, and then holds that line; otherwise it fails with a
 *   message naming the key and keeps no part of it. A password_file that
 *   does not exist fails cleanly too.
 * err buffers are always NUL-terminated.
 *
 * The configuration is natsync-gateway's (struct ngw_config), so that the
 * [gateway] keys of gateway/ngw_config.c are fuzzed too.
 *
 * Not here: the [gateway] check and the configuration's meaning to the
 * programs (test_config.c covers both).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ngw_config.h"
#include "nsa_config.h"
#include "nsa_log.h"
#include "nst_fuzz.h"

#define ERR_LEN 1024
#define MISSING_PASSWORD_FILE "/nonexistent/natsync-fuzz/store.password"

/* memfds for the input file, the printout and the password file. */
static int in_fd = -1, print_fd = -1, pw_fd = -1;
static char in_path[64], print_path[64], pw_path[64];

/* Large (PATH_MAX fields): static rather than on the stack. */
static struct ngw_config cfg, again, snap;

static int memfd_path(const char *name, char *path, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0) {
		perror("memfd_create");
		exit(1);
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

static void fill(int fd, const void *data, size_t size)
{
	NST_FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate: %s", strerror(errno));
	NST_FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size,
		       "pwrite: %s", strerror(errno));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	nsa_log_verbosity = NSA_LOG_ERR;
	in_fd = memfd_path("natsync-fuzz-ini", in_path, sizeof(in_path));
	print_fd = memfd_path("natsync-fuzz-printed", print_path,
			      sizeof(print_path));
	pw_fd = memfd_path("natsync-fuzz-password", pw_path, sizeof(pw_path));
	if (fchmod(pw_fd, 0600) != 0) {
		perror("fchmod");
		exit(1);
	}
	return 0;
}

static void check_err(const char *err, const char *prefix)
{
	NST_FUZZ_CHECK(memchr(err, '\0', ERR_LEN) != NULL,
		       "error message not NUL-terminated");
	NST_FUZZ_CHECK(err[0] != '\0', "failure without a message");
	NST_FUZZ_CHECK(strncmp(err, prefix, strlen(prefix)) == 0,
		       "message does not start with '%s': %s", prefix, err);
}

/* The printout of c, NUL-terminated, malloc'd. */
static char *print_config(const struct ngw_config *c, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);

	NST_FUZZ_CHECK(f != NULL, "open_memstream: %s", strerror(errno));
	nsa_config_print(&c->agent, f);
	NST_FUZZ_CHECK(fclose(f) == 0, "printing failed");
	return text;
}

/* Show the first line where two printouts differ. */
static void show_difference(const char *a, const char *b)
{
	size_t line_start = 0, i = 0;

	while (a[i] && a[i] == b[i]) {
		if (a[i] == '\n')
			line_start = i + 1;
		i++;
	}
	fprintf(stderr,
		"first difference:\n  loaded:   %.*s\n  reloaded: %.*s\n",
		(int)strcspn(a + line_start, "\n"), a + line_start,
		(int)strcspn(b + line_start, "\n"), b + line_start);
}

/* c must print to text that loads back to c exactly. */
static void check_round_trip(const struct ngw_config *c, const char *how)
{
	char err[ERR_LEN];
	size_t len, len2;
	char *text = print_config(c, &len), *text2;
	int rc;

	fill(print_fd, text, len);
	ngw_config_defaults(&again);
	memset(err, 0x7f, sizeof(err));
	rc = nsa_config_load(&again.agent, print_path, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "printout:\n%s", text);
		NST_FUZZ_CHECK(0, "%s: the printout does not load back: %s",
			       how, err);
	}
	if (memcmp(c, &again, sizeof(*c)) != 0) {
		text2 = print_config(&again, &len2);
		show_difference(text, text2);
		free(text2);
		NST_FUZZ_CHECK(0, "%s: the printout loads back differently",
			       how);
	}
	free(text);
}

/* The line number in "PATH:LINE: ..." exists in the input. */
static void check_error_line(const char *err, const uint8_t *data, size_t size)
{
	size_t plen = strlen(in_path), lines = 1;
	char *end;
	long line;

	check_err(err, in_path);
	NST_FUZZ_CHECK(err[plen] == ':', "no ':' after the path: %s", err);
	if (err[plen + 1] < '0' || err[plen + 1] > '9')
		return; /* "PATH: cannot open" and the like */
	line = strtol(err + plen + 1, &end, 10);
	for (size_t i = 0; i + 1 < size; i++)
		lines += data[i] == '\n';
	NST_FUZZ_CHECK(*end == ':' && line >= 1 && (size_t)line <= lines,
		       "line %ld of an input of %zu lines: %s", line, lines,
		       err);
}

static void fuzz_load(const uint8_t *data, size_t size)
{
	char err[ERR_LEN];
	int rc;

	fill(in_fd, data, size);
	ngw_config_defaults(&cfg);
	memset(err, 0x7f, sizeof(err));
	rc = nsa_config_load(&cfg.agent, in_path, err, sizeof(err));
	NST_FUZZ_CHECK(rc == 0 || rc == -1, "load returned %d", rc);
	if (rc != 0) {
		check_error_line(err, data, size);
		return;
	}
	check_round_trip(&cfg, "file");

	ngw_config_defaults(&snap);
	NST_FUZZ_CHECK(
		nsa_config_load(&snap.agent, in_path, err, sizeof(err)) == 0 &&
			memcmp(&snap, &cfg, sizeof(cfg)) == 0,
		"loading the same file twice differs");

	/* A password file that is not there: a clean failure, no password. */
	NST_FUZZ_CHECK(
		nsa_config_set(&cfg.agent,
			       "store.password_file=" MISSING_PASSWORD_FILE,
			       err, sizeof(err)) == 0,
		"cannot set password_file: %s", err);
	memset(err, 0x7f, sizeof(err));
	NST_FUZZ_CHECK(nsa_config_finish(&cfg.agent, err, sizeof(err)) == -1,
		       "finish accepted a missing password file");
	check_err(err, "");
	for (size_t i = 0; i < sizeof(cfg.agent.store.password); i++)
		NST_FUZZ_CHECK(cfg.agent.store.password[i] == '\0',
			       "a failed finish left a password");
}

static void fuzz_set(const uint8_t *data, size_t size)
{
	char line[4096], err[ERR_LEN];
	size_t pos = 0;

	ngw_config_defaults(&cfg);
	while (pos < size) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
		int rc;

		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, data + pos, len);
		line[len] = '\0';
		pos = nl ? (size_t)(nl - data) + 1 : size;

		snap = cfg;
		memset(err, 0x7f, sizeof(err));
		rc = nsa_config_set(&cfg.agent, line, err, sizeof(err));
		NST_FUZZ_CHECK(rc == 0 || rc == -1, "set returned %d", rc);
		if (rc != 0) {
			check_err(err, "--set");
			NST_FUZZ_CHECK(memcmp(&snap, &cfg, sizeof(cfg)) == 0,
				       "refused '%s' changed the configuration",
				       line);
		}
	}
	check_round_trip(&cfg, "--set");
}

/* The rules for a secret file (password_file, batch_key_file): one line
 * of text (one trailing newline allowed), not empty, shorter than its
 * buffer. */
static int secret_ok(const uint8_t *data, size_t size, size_t cap, size_t *n)
{
	size_t len = size;

	if (len > 0 && data[len - 1] == '\n')
		len--;
	*n = len;
	if (size >= cap || len == 0)
		return 0;
	return !memchr(data, '\0', len) && !memchr(data, '\n', len);
}

static void check_zero(const char *buf, size_t cap, const char *what)
{
	for (size_t i = 0; i < cap; i++)
		NST_FUZZ_CHECK(buf[i] == '\0', "a refused %s left bytes behind",
			       what);
}

/* The input as the secret file named by key: file is its path field,
 * buf (cap bytes) where finish puts the secret, len its length there (NULL:
 * a C string). */
static void fuzz_secret(const uint8_t *data, size_t size, const char *key,
			char *file, size_t file_cap, const char *buf,
			size_t cap, const size_t *len)
{
	char err[ERR_LEN];
	size_t n;
	int ok = secret_ok(data, size, cap, &n), rc;

	ngw_config_defaults(&cfg);
	snprintf(file, file_cap, "%s", pw_path);
	memset(err, 0x7f, sizeof(err));
	rc = nsa_config_finish(&cfg.agent, err, sizeof(err));
	NST_FUZZ_CHECK(rc == (ok ? 0 : -1), "finish returned %d for a %s %s",
		       rc, ok ? "good" : "bad", key);
	if (rc == 0) {
		NST_FUZZ_CHECK((len ? *len : strlen(buf)) == n &&
				       memcmp(buf, data, n) == 0,
			       "the secret of %s is not the file's line", key);
	} else {
		check_err(err, key);
		check_zero(buf, cap, key);
	}
}

/* The input as the password file, then as the batch key file. */
static void fuzz_secrets(const uint8_t *data, size_t size)
{
	struct nsa_config *c = &cfg.agent;

	fill(pw_fd, data, size);
	fuzz_secret(data, size, "password_file", c->password_file,
		    sizeof(c->password_file), c->store.password,
		    sizeof(c->store.password), NULL);
	fuzz_secret(data, size, "batch_key_file", c->batch_key_file,
		    sizeof(c->batch_key_file), c->batch_key,
		    sizeof(c->batch_key), &c->batch_key_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return -1;
	fuzz_load(data, size);
	fuzz_set(data, size);
	fuzz_secrets(data, size);
	return 0;
}
