/*
 * skip_probe.c - a test executable for test_skip.c to run: one test that
 * passes and one that skips itself when NST_PROBE_SKIP is set (with
 * nst_skip) or, when NST_PROBE_NEED_ROOT is set, where nst_need_root
 * skips, as the root-only tests do.
 */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "nst_skip.h"

Test(probe, passes)
{
	cr_assert(1);
}

Test(probe, skips_when_asked)
{
	if (getenv("NST_PROBE_SKIP"))
		nst_skip("NST_PROBE_SKIP is set");
	if (getenv("NST_PROBE_NEED_ROOT"))
		nst_need_root("needs root");
}
