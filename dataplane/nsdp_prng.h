/*
 * nsdp_prng.h - the synthetic source's pseudo-random numbers: splitmix64
 * (seeding, and a flow's hash from its index) and xoshiro256** (the
 * events), both fixed so that a seed always gives the same events.
 */
#ifndef NSDP_PRNG_H
#define NSDP_PRNG_H

#include <stdint.h>

static inline uint64_t nsdp_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t nsdp_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t nsdp_xoshiro(uint64_t s[4])
{
	uint64_t r = nsdp_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = nsdp_rotl(s[3], 45);
	return r;
}

/* Uniform in [0, n) without division (Lemire's multiply-shift). */
static inline uint64_t nsdp_below(uint64_t s[4], uint64_t n)
{
	return (uint64_t)(((unsigned __int128)nsdp_xoshiro(s) * n) >> 64);
}

#endif
