/*
 * nst_tsan_boxfort.c - lets Criterion tests start under ThreadSanitizer.
 * Preloaded (LD_PRELOAD) by scripts/sanitize.sh into the ThreadSanitizer
 * test runs only; never linked into natsync.
 *
 * Criterion runs every test in a process of its own through BoxFort, which
 * first maps a shared arena at a random address between 0x2000_0000_0000
 * and 0x6000_0000_0000, picked with rand_r() and probed with mincore().
 * ThreadSanitizer reserves almost all of that range for its shadow and
 * meta memory, so every probe fails and Criterion stops with "Could not
 * initialize inheritable arena: Resource temporarily unavailable"
 * (Criterion issue #274). The one window it leaves free there is the one
 * for position-independent executables, 0x5500_0000_0000 to
 * 0x5680_0000_0000, whose low part the kernel uses for the executable
 * itself. In a Criterion process this rand_r() returns offsets that place
 * the arena at 0x5660_0000_0000 to 0x5678_0000_0000 (BoxFort maps at
 * 0x2000_0000_0000 + offset x 16 MiB): above where the executable lands,
 * below the end of the window. BoxFort still probes each address and tries
 * the next one if it is taken.
 *
 * Invariants: in a process without Criterion (redis-server and the
 * programs the tests start inherit the preload) rand_r is the C library's.
 * Natsync and DPDK do not call rand_r, so nothing else sees these values.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

int rand_r(unsigned int *seed);

int rand_r(unsigned int *seed)
{
	static const int offsets[] = {0x366000, 0x366800, 0x367000, 0x367800};
	static unsigned int next;
	static int (*libc_rand_r)(unsigned int *);

	if (dlsym(RTLD_DEFAULT, "criterion_run_all_tests") != NULL)
		return offsets[next++ % 4];
	if (libc_rand_r == NULL)
		*(void **)&libc_rand_r = dlsym(RTLD_NEXT, "rand_r");
	return libc_rand_r ? libc_rand_r(seed) : 0;
}
