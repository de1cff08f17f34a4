/*
 * nsa_log.c - timestamped log lines on stderr. A line is written with one
 * call so that lines from several threads do not interleave; the time is
 * UTC, to the millisecond. Not for the fast path, no files, no rotation.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nsa_log.h"
#include "nsdp_time.h"

int nsa_log_verbosity = NSA_LOG_INFO;

void nsa_log(enum nsa_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	char line[1024];
	uint64_t now = nsdp_realtime_ns();
	time_t sec = (time_t)(now / 1000000000u);
	struct tm tm;
	va_list ap;
	int n;

	if ((int)lvl > nsa_log_verbosity)
		return;
	gmtime_r(&sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%02d:%02d:%02d.%03ld natsync %s: ", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, (long)(now % 1000000000u / 1000000u),
		     names[lvl]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}
