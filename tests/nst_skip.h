/*
 * nst_skip.h - test support: skipping a test that cannot run here. A skip
 * is not a pass: the test executable then exits 77 (meson shows SKIP), or
 * fails when CI=true is in the environment (see nst_skip.c).
 */
#ifndef NST_SKIP_H
#define NST_SKIP_H

/* Skip the current test, saying why; does not return. */
__attribute__((noreturn)) void nst_skip(const char *why);

/* nst_skip(why) unless the test runs as root. NATSYNC_TEST_FORCE_SKIP=1
 * skips as root too, to see what a skip does without giving up root. */
void nst_need_root(const char *why);

/* 1 in a build with AddressSanitizer (gcc's __SANITIZE_ADDRESS__,
 * clang's __has_feature), else 0: the time bounds that allow for its
 * slower processes. */
#if defined(__SANITIZE_ADDRESS__)
#define NST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NST_ASAN 1
#endif
#endif
#ifndef NST_ASAN
#define NST_ASAN 0
#endif

#endif
