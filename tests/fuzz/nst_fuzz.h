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

/* FORMAT.md's NAT64 rules, written from RFC 6052 section 2.2's figure:
 * where the four bytes of the IPv4 address sit for each prefix length. */
static inline int nst_fuzz_model_nat64(const uint8_t *p)
{
	static const struct {
		uint8_t len, at[4];
	} fig[] = {{32, {4, 5, 6, 7}},	  {40, {5, 6, 7, 9}},
		   {48, {6, 7, 9, 10}},	  {56, {7, 9, 10, 11}},
		   {64, {9, 10, 11, 12}}, {96, {12, 13, 14, 15}}};
	const uint8_t *daddr6 = p + 40, *daddr4 = p + 64;

	if (p[73] || p[74] || p[75])
		return 0;
	for (size_t f = 0; f < sizeof(fig) / sizeof(fig[0]); f++) {
		int used[16] = {0};

		if (fig[f].len != p[72])
			continue;
		for (int i = 0; i < fig[f].len / 8; i++)
			used[i] = 1;
		for (int i = 0; i < 4; i++) {
			if (daddr6[fig[f].at[i]] != daddr4[i])
				return 0;
			used[fig[f].at[i]] = 1;
		}
		for (int i = 0; i < 16; i++)
			if (!used[i] && daddr6[i] != 0)
				return 0;
		return 1;
	}
	return 0;
}

/* FORMAT.md's record refusal tables ("A decoder refuses a record with",
 * and the IPv6 families'), in their order: the bytes a record at p uses
 * (48, 96 or 76), or the error. The batch and record targets both check
 * the decoders against it. */
static inline int nst_fuzz_model_record(const uint8_t *p, size_t len)
{
	size_t want;

	if (len < 1)
		return -EMSGSIZE;
	if (p[0] != 1)
		return -EPROTO;
	if (len < 2)
		return -EMSGSIZE;
	switch (p[1]) {
	case 4:
		want = 48;
		break;
	case 6:
		want = 96;
		break;
	case 64:
		want = 76;
		break;
	default:
		return -EAFNOSUPPORT;
	}
	if (len < want)
		return -EMSGSIZE;
	if (p[3] < 1 || p[3] > 3 || p[2] == 0)
		return -EINVAL;
	if (p[1] == 64 && !nst_fuzz_model_nat64(p))
		return -EINVAL;
	return (int)want;
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
