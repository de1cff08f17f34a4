/*
 * nsa_log.c - timestamped log lines on stderr. A line is written with one
 * call so that lines from several threads do not interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "nsa_log.h"

int nsa_log_verbosity = NSA_LOG_INFO;

void nsa_log(enum nsa_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if ((int)lvl > nsa_log_verbosity)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%02d:%02d:%02d.%03ld natsync %s: ", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, names[lvl]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}
