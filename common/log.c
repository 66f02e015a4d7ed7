// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int psd_log_level = PSD_LOG_WARN;

static char log_who[64] = "psched";
/* log_who is set once the node table is known, while other threads log. */
static pthread_mutex_t log_who_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char errmsg_buf[512];

static const char *const lvl_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

void psd_log_set_who(const char *who)
{
	pthread_mutex_lock(&log_who_lock);
	snprintf(log_who, sizeof(log_who), "%s", who);
	pthread_mutex_unlock(&log_who_lock);
}

/* Logs go to stderr; the library never writes to stdout. */
void psd_log_emit(int lvl, const char *file, int line, const char *fmt, ...)
{
	int saved = errno;
	char buf[1024];
	char when[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	/* ISO 8601 UTC with microseconds: logs of several hosts sort and
	 * compare as they are. */
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&log_who_lock);
	n = snprintf(buf, sizeof(buf), "[%s.%06ldZ %s %s] ", when,
		     ts.tv_nsec / 1000, log_who,
		     lvl_names[lvl < 0 ? 0 : (lvl > 3 ? 3 : lvl)]);
	pthread_mutex_unlock(&log_who_lock);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 64)
		n = (int)sizeof(buf) - 64;
	if (psd_log_level >= PSD_LOG_DEBUG)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%s:%d)",
			      file, line);
	buf[n++] = '\n';
	(void)!write(STDERR_FILENO, buf, (size_t)n);
	errno = saved;
}

int psd_set_errmsgv(int err, const char *fmt, va_list ap)
{
	vsnprintf(errmsg_buf, sizeof(errmsg_buf), fmt, ap);
	return err;
}

int psd_set_errmsg(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	psd_set_errmsgv(err, fmt, ap);
	va_end(ap);
	return err;
}

const char *psched_version(void)
{
	return PSCHED_VERSION;
}

const char *psched_errmsg(void)
{
	return errmsg_buf;
}

const char *psched_strerror(int err)
{
	static __thread char buf[64];

	switch (err) {
	case 0:
		return "success";
	case PSCHED_ENODEDEAD:
		return "peer node died";
	case PSCHED_ESHUTDOWN:
		return "cluster is shutting down";
	case PSCHED_EUNKNOWNKEY:
		return "unknown key";
	case PSCHED_ESIZE:
		return "length does not match the key's length";
	case PSCHED_EREMOTE:
		return "peer rejected the request";
	case PSCHED_ERENDEZVOUS:
		return "cluster rendezvous failed";
	default:
		break;
	}
	if (err < 0 && err > -PSCHED_E_BASE)
		return strerror_r(-err, buf, sizeof(buf));
	snprintf(buf, sizeof(buf), "unknown error %d", err);
	return buf;
}

uint64_t psd_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t psd_now_ms(void)
{
	return psd_now_us() / 1000u;
}

void psd_deadline(struct timespec *ts, unsigned timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += timeout_ms / 1000u;
	ts->tv_nsec += (long)(timeout_ms % 1000u) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
