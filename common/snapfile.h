/* SPDX-License-Identifier: MIT */
/*
 * Snapshot files (docs/snapshots.md): what one server held at one step,
 * written by every server in parallel into
 *
 *   DIR/step-T/server-I-of-S.psnap
 *
 * and read back by any number of servers (each takes the byte ranges and
 * rows it holds in its own job).  A snapshot of step T is complete when
 * all S files of step-T are there.  Little-endian:
 *
 *   header (64 bytes): "PSCHSNAP", u32 version (1), u32 header bytes
 *     (64), u64 step, u32 server, u32 servers, u8 job tag[16], u64
 *     records, u64 zero
 *   records: u32 kind, u32 zero, u64 body bytes, body
 *   trailer: HMAC-SHA256 under the job secret of the SHA-256 of all the
 *     bytes before it (32 bytes)
 *
 * The job tag (the first 16 bytes of HMAC-SHA256(secret, "psched
 * snapshot job")) tells a snapshot of another job from a corrupt one; the
 * trailer refuses a changed or truncated file.  Record bodies are the
 * server's business (server/kvs_snap.c); this file frames and checks
 * them.
 */
#ifndef PSCHED_COMMON_SNAPFILE_H
#define PSCHED_COMMON_SNAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "digest.h"

#define PSD_SNAP_MAGIC	 "PSCHSNAP"
#define PSD_SNAP_VERSION 1u
#define PSD_SNAP_HDR	 64u
#define PSD_SNAP_REC_HDR 16u
#define PSD_SNAP_TAG	 16u
/* The most servers a snapshot may name (a sanity bound on headers). */
#define PSD_SNAP_MAX_SERVERS 4096u

enum psd_snap_kind {
	PSD_SNAP_DENSE = 1,  /* a byte range of a dense key */
	PSD_SNAP_STATES = 2, /* optimizer states of one key (optim.h) */
	PSD_SNAP_ROWS = 3,   /* the stored rows of a row-sparse key */
};

/* One record to write: its kind and its body in up to 3 parts. */
struct psd_snap_out {
	uint32_t kind;
	struct psd_iov_c part[3];
};

struct psd_snap_file {
	uint8_t *buf; /* the whole file, mapped read-only */
	size_t len;
	uint64_t step;
	uint32_t server, nservers;
	uint64_t nrec;
	char path[4200];
};

/* The latest complete snapshot of a directory. */
struct psd_snap_set {
	uint64_t step;
	uint32_t nservers;
	struct psd_snap_file *files; /* [nservers], by server */
	char dir[4096];		     /* its step directory */
};

/* The job tag of @sec. */
void psd_snap_job_tag(const struct psd_auth_secret *sec,
		      uint8_t tag[PSD_SNAP_TAG]);
/*
 * Write server @server of @nservers's file of step @step under @dir
 * (@dir/step-@step/ made if missing): to a temporary name, synced, then
 * renamed into place.  0 or -errno, psched_errmsg() naming the path.
 */
int psd_snap_write(const char *dir, const struct psd_auth_secret *sec,
		   uint64_t step, uint32_t server, uint32_t nservers,
		   const struct psd_snap_out *recs, size_t nrec);
/* Remove server @server's file of step @step (and the step directory
 * when it is then empty); errors ignored. */
void psd_snap_remove(const char *dir, uint64_t step, uint32_t server,
		     uint32_t nservers);
/*
 * Read @path: the file whole, its header, every record's frame and the
 * trailer checked.  0, or -EPROTO (malformed, truncated, corrupt),
 * -EACCES (another job's), -errno, with psched_errmsg() naming the file
 * and what is wrong.
 */
int psd_snap_file_read(const char *path, const struct psd_auth_secret *sec,
		       struct psd_snap_file *f);
/*
 * Open the latest complete snapshot under @dir (a directory of step-T
 * directories, or one step directory): every file read and checked.
 * Steps with files missing (a snapshot being written, or cut short) are
 * skipped, logged.  0, or an error naming what is wrong: no complete
 * snapshot, a file that does not check, files that disagree.  Nothing is
 * kept on an error.
 */
int psd_snap_open(const char *dir, const struct psd_auth_secret *sec,
		  struct psd_snap_set *set);
void psd_snap_close(struct psd_snap_set *set);
/*
 * The record after *@pos (0: the first) of @f, already checked by
 * psd_snap_file_read(): 1 with its kind and body, 0 at the end.
 */
int psd_snap_next(const struct psd_snap_file *f, size_t *pos, uint32_t *kind,
		  const uint8_t **body, uint64_t *len);

/* Where psd_snap_set_next() is in a set: zeroed to start. */
struct psd_snap_cursor {
	uint32_t file;
	size_t pos;
};
/* psd_snap_next() over every file of @set in turn: 1 with the record's
 * kind, body and file (*@f), 0 after the last file's last record. */
int psd_snap_set_next(const struct psd_snap_set *set,
		      struct psd_snap_cursor *cur, uint32_t *kind,
		      const uint8_t **body, uint64_t *len,
		      const struct psd_snap_file **f);

#endif
