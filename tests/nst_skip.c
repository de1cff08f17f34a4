/*
 * nst_skip.c - a skipped test is not a passed one.
 *
 * Criterion reports a skip and still exits 0, so meson would show OK for a
 * test that never ran. Every test executable links this file whole (its
 * report hook must be there even where nothing calls nst_skip): when the
 * tests are done and one skipped itself, the executable exits 77, meson's
 * SKIP; with CI set (to anything but "false" or "0") it exits 1, since a
 * CI run that skips a test has not tested what it claims. Tests that the
 * command line filtered out (--filter) are not skips. A run with failures
 * keeps Criterion's status.
 *
 * It also serialises tests that share something the machine has one of
 * (the hugepage pool, the package database) without making the whole
 * suite wait: meson gives such a test NATSYNC_TEST_GROUP=NAME, and the
 * test runner holds an exclusive lock on /tmp/natsync-test-NAME.lock
 * from before its first test to its exit, so that tests of one group run
 * one at a time while the rest of the suite runs beside them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "nst_skip.h"

#define EXIT_SKIP 77

static int skip_status;

void nst_skip(const char *why)
{
	cr_skip_test("%s", why);
}

void nst_need_root(const char *why)
{
	const char *force = getenv("NATSYNC_TEST_FORCE_SKIP");

	if (geteuid() != 0 || (force && strcmp(force, "1") == 0))
		nst_skip(why);
}

static int in_ci(void)
{
	const char *ci = getenv("CI");

	return ci && ci[0] && strcmp(ci, "false") != 0 && strcmp(ci, "0") != 0;
}

/* Criterion's main has returned and written its reports: only the status
 * changes. */
static void skip_exit(void)
{
	fflush(NULL);
	_exit(skip_status);
}

/* Held until the runner exits (close-on-exec: the programs a test starts
 * never hold it). */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	const char *group = getenv("NATSYNC_TEST_GROUP");
	char path[256];
	int fd;

	(void)set;
	if (!group || !group[0])
		return;
	snprintf(path, sizeof path, "/tmp/natsync-test-%s.lock", group);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(EXIT_FAILURE);
	}
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			fprintf(stderr, "flock %s: %s\n", path,
				strerror(errno));
			exit(EXIT_FAILURE);
		}
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	size_t skipped = 0;

	for (struct criterion_suite_stats *ss = stats->suites; ss;
	     ss = ss->next)
		for (struct criterion_test_stats *ts = ss->tests; ts;
		     ts = ts->next)
			if (ts->test_status == CR_STATUS_SKIPPED &&
			    !ts->test->data->disabled)
				skipped++;
	if (!skipped || stats->tests_failed || stats->tests_crashed)
		return;
	skip_status = in_ci() ? EXIT_FAILURE : EXIT_SKIP;
	fprintf(stderr, "%zu test%s skipped: %s\n", skipped,
		skipped == 1 ? "" : "s",
		skip_status == EXIT_SKIP ? "exit status 77 (SKIP)"
					 : "CI is set, so the run fails");
	atexit(skip_exit);
}
