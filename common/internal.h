/* SPDX-License-Identifier: MIT */
/* Private umbrella header: logging, error helpers, time, small utilities. */
#ifndef PSCHED_COMMON_INTERNAL_H
#define PSCHED_COMMON_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psched.h"
#include "cfg.h"

#ifndef psd_container_of
#define psd_container_of(ptr, type, member)                                    \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#endif

#define PSD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum psd_log_lvl {
	PSD_LOG_ERR = 0,
	PSD_LOG_WARN = 1,
	PSD_LOG_INFO = 2,
	PSD_LOG_DEBUG = 3,
};

extern int psd_log_level;

/* Name shown in every log line: "server[1]" etc.  Set once at start. */
void psd_log_set_who(const char *who);
void psd_log_emit(int lvl, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Test the level first: a disabled log costs one compare, no formatting. */
#define psd_log(lvl, ...)                                                      \
	do {                                                                   \
		if ((lvl) <= psd_log_level)                                    \
			psd_log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__);  \
	} while (0)

#define psd_err(...)   psd_log(PSD_LOG_ERR, __VA_ARGS__)
#define psd_warn(...)  psd_log(PSD_LOG_WARN, __VA_ARGS__)
#define psd_info(...)  psd_log(PSD_LOG_INFO, __VA_ARGS__)
#define psd_debug(...) psd_log(PSD_LOG_DEBUG, __VA_ARGS__)

/* -errno of the last failed syscall; -EIO if errno is 0. */
static inline int psd_neg_errno(void)
{
	return errno ? -errno : -EIO;
}

/* Set the calling thread's psched_errmsg() text; returns @err. */
int psd_set_errmsg(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int psd_set_errmsgv(int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* CLOCK_MONOTONIC in microseconds / milliseconds. */
uint64_t psd_now_us(void);
uint64_t psd_now_ms(void);
/* Absolute CLOCK_MONOTONIC deadline for pthread_cond_timedwait. */
struct timespec;
void psd_deadline(struct timespec *ts, unsigned timeout_ms);

/* Intrusive doubly linked list. */
struct psd_list {
	struct psd_list *next;
	struct psd_list *prev;
};

static inline void psd_list_init(struct psd_list *h)
{
	h->next = h;
	h->prev = h;
}

static inline bool psd_list_empty(const struct psd_list *h)
{
	return h->next == h;
}

static inline void psd_list_add_tail(struct psd_list *h, struct psd_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void psd_list_del(struct psd_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n;
	n->prev = n;
}

#define psd_list_for_each(pos, head)                                           \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)
#define psd_list_for_each_safe(pos, tmp, head)                                 \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);       \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif
