/*
 * nsdp_time.h - the clocks every natsync program and test reads, in one
 * place: CLOCK_REALTIME for what records carry (comparable across hosts),
 * CLOCK_MONOTONIC for timeouts and rates. Not for the per-packet path,
 * which reads the time once per burst and passes it down.
 */
#ifndef NSDP_TIME_H
#define NSDP_TIME_H

#include <stdint.h>
#include <time.h>

#define NSDP_NS_PER_S 1000000000ull
#define NSDP_NS_PER_MS 1000000ull

static inline uint64_t nsdp_clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * NSDP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Wall clock, as records carry it. */
static inline uint64_t nsdp_realtime_ns(void)
{
	return nsdp_clock_ns(CLOCK_REALTIME);
}

static inline uint64_t nsdp_mono_ns(void)
{
	return nsdp_clock_ns(CLOCK_MONOTONIC);
}

/* Monotonic seconds, for rates and deadlines in programs and tests. */
static inline double nsdp_now_s(void)
{
	return (double)nsdp_mono_ns() / 1e9;
}

static inline void nsdp_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / NSDP_NS_PER_S),
			      (long)(ns % NSDP_NS_PER_S)};

	nanosleep(&ts, NULL);
}

static inline void nsdp_sleep_us(uint64_t us)
{
	nsdp_sleep_ns(us * 1000);
}

static inline void nsdp_sleep_ms(unsigned int ms)
{
	nsdp_sleep_us((uint64_t)ms * 1000);
}

/* Sleep ms, in steps of at most 10 ms, returning early once *stop is set
 * (read relaxed, as every natsync stop flag). Returns *stop. */
static inline int nsdp_sleep_ms_unless(const int *stop, unsigned int ms)
{
	while (ms > 0 && !__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		unsigned int step = ms < 10 ? ms : 10;

		nsdp_sleep_ms(step);
		ms -= step;
	}
	return __atomic_load_n(stop, __ATOMIC_RELAXED);
}

#endif
