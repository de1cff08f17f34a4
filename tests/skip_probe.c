/*
 * skip_probe.c - a test executable for test_skip.c to run: one test that
 * passes and one that skips itself when NST_PROBE_SKIP is set, as the
 * root-only tests do when they run without root.
 */
#include <stdlib.h>

#include <criterion/criterion.h>

Test(probe, passes)
{
	cr_assert(1);
}

Test(probe, skips_when_asked)
{
	if (getenv("NST_PROBE_SKIP"))
		cr_skip_test("NST_PROBE_SKIP is set");
}
