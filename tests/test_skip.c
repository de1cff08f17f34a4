/*
 * test_skip.c - a skipped test is never a silent pass: a test executable
 * with a skipped test exits 77 (meson shows SKIP), and with CI=true in the
 * environment it fails. Runs skip_probe with and without a skip.
 */
#include <criterion/criterion.h>

#include "nst_store.h"

/* skip_probe's exit status with env (an env(1) argument list). Without
 * BXFI_MAP, which tells a Criterion program it is a test's sandbox. */
static int probe(const char *env)
{
	return nst_sh("env -u BXFI_MAP -u CI -u NATSYNC_TEST_FORCE_SKIP %s %s "
		      "--jobs 1 "
		      ">&2 2>&1",
		      env, nst_build("tests/skip_probe"));
}

Test(skip, executable_without_a_skip_exits_0)
{
	cr_assert_eq(probe(""), 0);
	cr_assert_eq(probe("CI=true"), 0);
}

Test(skip, executable_with_a_skip_exits_77_outside_ci)
{
	int rc = probe("NST_PROBE_SKIP=1");

	cr_assert_eq(rc, 77, "skip_probe with a skipped test exited %d", rc);
	rc = probe("NST_PROBE_SKIP=1 CI=false");
	cr_assert_eq(rc, 77, "with CI=false it exited %d", rc);
}

Test(skip, forced_skip_of_a_root_only_test_exits_77)
{
	int rc = probe("NST_PROBE_NEED_ROOT=1 NATSYNC_TEST_FORCE_SKIP=1");

	cr_assert_eq(rc, 77, "exited %d", rc);
}

Test(skip, executable_with_a_skip_fails_under_ci)
{
	int rc = probe("NST_PROBE_SKIP=1 CI=true");

	cr_assert_eq(rc, 1, "skip_probe with a skip under CI=true exited %d",
		     rc);
}
