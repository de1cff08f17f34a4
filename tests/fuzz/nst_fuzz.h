/*
 * nst_fuzz.h - what the libFuzzer targets of tests/fuzz share: the entry
 * points libFuzzer calls, and a check that stays on in release builds.
 *
 * The build defines NDEBUG (b_ndebug=if-release), so assert() would vanish;
 * NST_FUZZ_CHECK always runs, prints what was expected and the input that
 * broke it, and aborts, which libFuzzer turns into a crash report with a
 * reproducer file. A property a target checks must hold for every input:
 * a failed check is a bug in natsync (or in the property), never noise.
 */
#ifndef NST_FUZZ_H
#define NST_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Print at most 256 bytes of buf in hex, 16 a line, to stderr. */
static inline void nst_fuzz_hexdump(const char *what, const void *buf,
				    size_t len)
{
	const uint8_t *p = buf;
	size_t shown = len < 256 ? len : 256;

	fprintf(stderr, "%s (%zu bytes%s):", what, len,
		shown < len ? ", first 256" : "");
	for (size_t i = 0; i < shown; i++)
		fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", p[i]);
	fputc('\n', stderr);
}

/* FORMAT.md's record refusal table ("A decoder refuses a record with"), in
 * its order: the bytes a record at p uses (48), or the error. The batch
 * and record targets both check the decoders against it. */
static inline int nst_fuzz_model_record(const uint8_t *p, size_t len)
{
	if (len < 1)
		return -EMSGSIZE;
	if (p[0] != 1)
		return -EPROTO;
	if (len < 2)
		return -EMSGSIZE;
	if (p[1] != 4)
		return -EAFNOSUPPORT;
	if (len < 48)
		return -EMSGSIZE;
	if (p[3] < 1 || p[3] > 3 || p[2] == 0)
		return -EINVAL;
	return 48;
}

#define NST_FUZZ_CHECK(cond, ...)                                         \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr,                                   \
				"%s:%d: property broken: %s: ", __FILE__, \
				__LINE__, #cond);                         \
			fprintf(stderr, __VA_ARGS__);                     \
			fputc('\n', stderr);                              \
			abort();                                          \
		}                                                         \
	} while (0)

#endif
