/*
 * nsa_log.h - the agent's log lines: one line each, to stderr, with a level
 * and the time. Not for the fast path.
 */
#ifndef NSA_LOG_H
#define NSA_LOG_H

enum nsa_log_level { NSA_LOG_ERR, NSA_LOG_WARN, NSA_LOG_INFO, NSA_LOG_DEBUG };

extern int nsa_log_verbosity; /* lines above this level are not printed */

void nsa_log(enum nsa_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define NSA_ERR(...) nsa_log(NSA_LOG_ERR, __VA_ARGS__)
#define NSA_WARN(...) nsa_log(NSA_LOG_WARN, __VA_ARGS__)
#define NSA_INFO(...) nsa_log(NSA_LOG_INFO, __VA_ARGS__)
#define NSA_DEBUG(...) nsa_log(NSA_LOG_DEBUG, __VA_ARGS__)

#endif
