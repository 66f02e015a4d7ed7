// SPDX-License-Identifier: MIT
/*
 * Snapshot files (common/snapfile.h; the format is in docs/snapshots.md):
 * writing one server's file, reading and checking one, and finding the
 * latest complete snapshot of a directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "snapfile.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files assume a little-endian host"
#endif

#define SNAP_MAC      PSD_SHA256_LEN
#define SNAP_TAG_TEXT "psched snapshot job"

void psd_snap_job_tag(const struct psd_auth_secret *sec,
		      uint8_t tag[PSD_SNAP_TAG])
{
	struct psd_iov_c part = { SNAP_TAG_TEXT, strlen(SNAP_TAG_TEXT) };
	uint8_t mac[PSD_SHA256_LEN];

	psd_hmac_sha256(sec->key, sec->len, &part, 1, mac);
	memcpy(tag, mac, PSD_SNAP_TAG);
}

/* The trailer of a file whose bytes hashed to @digest. */
static void snap_mac(const struct psd_auth_secret *sec,
		     const uint8_t digest[PSD_SHA256_LEN],
		     uint8_t mac[SNAP_MAC])
{
	struct psd_iov_c part = { digest, PSD_SHA256_LEN };

	psd_hmac_sha256(sec->key, sec->len, &part, 1, mac);
}

static void snap_step_dir(char *out, size_t cap, const char *dir, uint64_t step)
{
	snprintf(out, cap, "%s/step-%llu", dir, (unsigned long long)step);
}

static void snap_file_path(char *out, size_t cap, const char *dir,
			   uint64_t step, uint32_t server, uint32_t nservers)
{
	snprintf(out, cap, "%s/step-%llu/server-%u-of-%u.psnap", dir,
		 (unsigned long long)step, server, nservers);
}

/* Write @len bytes at @p to @fd, hashing them into @h. */
static int snap_put(int fd, struct psd_sha256 *h, const void *p, size_t len)
{
	const uint8_t *b = p;
	ssize_t k;

	if (h)
		psd_sha256_update(h, p, len);
	while (len) {
		k = write(fd, b, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		b += k;
		len -= (size_t)k;
	}
	return 0;
}

static int snap_put_all(int fd, const struct psd_auth_secret *sec,
			uint64_t step, uint32_t server, uint32_t nservers,
			const struct psd_snap_out *recs, size_t nrec)
{
	uint8_t hdr[PSD_SNAP_HDR] = { 0 }, rh[PSD_SNAP_REC_HDR] = { 0 };
	uint8_t digest[PSD_SHA256_LEN], mac[SNAP_MAC];
	uint32_t v32 = PSD_SNAP_VERSION, hl = PSD_SNAP_HDR;
	uint64_t n64 = nrec, blen;
	struct psd_sha256 h;
	size_t i, k;
	int ret;

	memcpy(hdr, PSD_SNAP_MAGIC, 8);
	memcpy(hdr + 8, &v32, 4);
	memcpy(hdr + 12, &hl, 4);
	memcpy(hdr + 16, &step, 8);
	memcpy(hdr + 24, &server, 4);
	memcpy(hdr + 28, &nservers, 4);
	psd_snap_job_tag(sec, hdr + 32);
	memcpy(hdr + 48, &n64, 8);
	psd_sha256_init(&h);
	ret = snap_put(fd, &h, hdr, sizeof(hdr));
	for (i = 0; i < nrec && !ret; i++) {
		blen = 0;
		for (k = 0; k < 3; k++)
			blen += recs[i].part[k].len;
		memcpy(rh, &recs[i].kind, 4);
		memcpy(rh + 8, &blen, 8);
		ret = snap_put(fd, &h, rh, sizeof(rh));
		for (k = 0; k < 3 && !ret; k++)
			if (recs[i].part[k].len)
				ret = snap_put(fd, &h, recs[i].part[k].base,
					       recs[i].part[k].len);
	}
	if (ret)
		return ret;
	psd_sha256_final(&h, digest);
	snap_mac(sec, digest, mac);
	return snap_put(fd, NULL, mac, sizeof(mac));
}

/* Make @path a directory if it is not one. */
static int snap_mkdir(const char *path)
{
	if (mkdir(path, 0755) && errno != EEXIST)
		return psd_set_errmsg(-errno, "snapshot: cannot make %s: %s",
				      path, strerror(errno));
	return 0;
}

static void snap_sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int psd_snap_write(const char *dir, const struct psd_auth_secret *sec,
		   uint64_t step, uint32_t server, uint32_t nservers,
		   const struct psd_snap_out *recs, size_t nrec)
{
	char sdir[4200], path[4300], tmp[4400];
	int fd, ret;

	ret = snap_mkdir(dir);
	snap_step_dir(sdir, sizeof(sdir), dir, step);
	if (!ret)
		ret = snap_mkdir(sdir);
	if (ret)
		return ret;
	snap_file_path(path, sizeof(path), dir, step, server, nservers);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return psd_set_errmsg(-errno, "snapshot: cannot create %s: %s",
				      tmp, strerror(errno));
	ret = snap_put_all(fd, sec, step, server, nservers, recs, nrec);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return psd_set_errmsg(ret, "snapshot: cannot write %s: %s",
				      path, strerror(-ret));
	}
	snap_sync_dir(sdir);
	return 0;
}

void psd_snap_remove(const char *dir, uint64_t step, uint32_t server,
		     uint32_t nservers)
{
	char sdir[4200], path[4300];

	snap_file_path(path, sizeof(path), dir, step, server, nservers);
	(void)unlink(path);
	snap_step_dir(sdir, sizeof(sdir), dir, step);
	(void)rmdir(sdir); /* fails while others' files are there */
}

/* The whole of @path mapped at @f->buf: read-only page cache, shared by
 * the servers of one host and given back by the kernel when memory is
 * short (a restoring server keeps the snapshot until it ends). */
static int snap_map(const char *path, struct psd_snap_file *f)
{
	struct stat st;
	void *p;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return psd_set_errmsg(-errno, "snapshot %s: %s", path,
				      strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return psd_set_errmsg(-EPROTO, "snapshot %s: not a file", path);
	}
	f->len = (size_t)st.st_size;
	if (f->len < PSD_SNAP_HDR + SNAP_MAC) {
		close(fd);
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: not a psched snapshot "
				      "file (%zu bytes)",
				      path, f->len);
	}
	p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return psd_set_errmsg(-errno, "snapshot %s: cannot map it: %s",
				      path, strerror(errno));
	f->buf = p;
	return 0;
}

static void snap_unmap(struct psd_snap_file *f)
{
	if (f->buf)
		munmap(f->buf, f->len);
	f->buf = NULL;
}

/* Header and trailer of @f (read whole). */
static int snap_check_head(const struct psd_auth_secret *sec,
			   struct psd_snap_file *f)
{
	uint8_t tag[PSD_SNAP_TAG], digest[PSD_SHA256_LEN], mac[SNAP_MAC];
	uint32_t v32, hl;

	if (f->len < PSD_SNAP_HDR + SNAP_MAC ||
	    memcmp(f->buf, PSD_SNAP_MAGIC, 8))
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: not a psched snapshot "
				      "file (%zu bytes, no PSCHSNAP header)",
				      f->path, f->len);
	memcpy(&v32, f->buf + 8, 4);
	memcpy(&hl, f->buf + 12, 4);
	if (v32 != PSD_SNAP_VERSION)
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: format version %u, this "
				      "psched reads version %u",
				      f->path, v32, PSD_SNAP_VERSION);
	if (hl != PSD_SNAP_HDR)
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: a header of %u bytes, "
				      "version 1 has %u",
				      f->path, hl, PSD_SNAP_HDR);
	memcpy(&f->step, f->buf + 16, 8);
	memcpy(&f->server, f->buf + 24, 4);
	memcpy(&f->nservers, f->buf + 28, 4);
	memcpy(&f->nrec, f->buf + 48, 8);
	psd_snap_job_tag(sec, tag);
	if (!psd_mem_equal_ct(tag, f->buf + 32, PSD_SNAP_TAG))
		return psd_set_errmsg(-EACCES,
				      "snapshot %s: written by another job "
				      "(its job tag is not this job "
				      "secret's): nothing loaded",
				      f->path);
	psd_sha256(f->buf, f->len - SNAP_MAC, digest);
	snap_mac(sec, digest, mac);
	if (!psd_mem_equal_ct(mac, f->buf + f->len - SNAP_MAC, SNAP_MAC))
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: checksum does not match "
				      "(the file is truncated or corrupt): "
				      "nothing loaded",
				      f->path);
	if (!f->nservers || f->nservers > PSD_SNAP_MAX_SERVERS ||
	    f->server >= f->nservers)
		return psd_set_errmsg(-EPROTO, "snapshot %s: server %u of %u",
				      f->path, f->server, f->nservers);
	return 0;
}

/* Every record's frame lies inside the file, and they are nrec. */
static int snap_check_recs(const struct psd_snap_file *f)
{
	size_t end = f->len - SNAP_MAC, pos = PSD_SNAP_HDR;
	uint64_t n = 0, blen;

	while (pos < end) {
		if (end - pos < PSD_SNAP_REC_HDR)
			break;
		memcpy(&blen, f->buf + pos + 8, 8);
		if (blen > end - pos - PSD_SNAP_REC_HDR)
			break;
		pos += PSD_SNAP_REC_HDR + (size_t)blen;
		n++;
	}
	if (pos != end || n != f->nrec)
		return psd_set_errmsg(-EPROTO,
				      "snapshot %s: record %llu is cut short "
				      "(the header says %llu records)",
				      f->path, (unsigned long long)n,
				      (unsigned long long)f->nrec);
	return 0;
}

int psd_snap_file_read(const char *path, const struct psd_auth_secret *sec,
		       struct psd_snap_file *f)
{
	int ret;

	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	ret = snap_map(path, f);
	if (!ret)
		ret = snap_check_head(sec, f);
	if (!ret)
		ret = snap_check_recs(f);
	if (ret)
		snap_unmap(f);
	return ret;
}

int psd_snap_next(const struct psd_snap_file *f, size_t *pos, uint32_t *kind,
		  const uint8_t **body, uint64_t *len)
{
	size_t p = *pos ? *pos : PSD_SNAP_HDR;

	if (p >= f->len - SNAP_MAC)
		return 0;
	memcpy(kind, f->buf + p, 4);
	memcpy(len, f->buf + p + 8, 8);
	*body = f->buf + p + PSD_SNAP_REC_HDR;
	*pos = p + PSD_SNAP_REC_HDR + (size_t)*len;
	return 1;
}

int psd_snap_set_next(const struct psd_snap_set *set,
		      struct psd_snap_cursor *cur, uint32_t *kind,
		      const uint8_t **body, uint64_t *len,
		      const struct psd_snap_file **f)
{
	for (; cur->file < set->nservers; cur->file++, cur->pos = 0) {
		*f = &set->files[cur->file];
		if (psd_snap_next(*f, &cur->pos, kind, body, len))
			return 1;
	}
	return 0;
}

void psd_snap_close(struct psd_snap_set *set)
{
	uint32_t i;

	if (set->files)
		for (i = 0; i < set->nservers; i++)
			snap_unmap(&set->files[i]);
	free(set->files);
	memset(set, 0, sizeof(*set));
}

/* "server-I-of-S.psnap": 1 with I and S. */
static int snap_parse_name(const char *name, uint32_t *i, uint32_t *s)
{
	unsigned a, b;
	int used = 0;

	if (sscanf(name, "server-%u-of-%u.psnap%n", &a, &b, &used) != 2 ||
	    name[used] || b == 0 || b > PSD_SNAP_MAX_SERVERS || a >= b)
		return 0;
	*i = a;
	*s = b;
	return 1;
}

/* Does step directory @sdir hold every file of one server count?  *@ns
 * gets the count (files of two counts: not complete). */
static bool snap_step_complete(const char *sdir, uint32_t *ns)
{
	uint32_t i, s, count = 0, want = 0;
	struct dirent *d;
	DIR *dp = opendir(sdir);

	if (!dp)
		return false;
	while ((d = readdir(dp))) {
		if (!snap_parse_name(d->d_name, &i, &s))
			continue;
		if (want && s != want) {
			closedir(dp);
			return false;
		}
		want = s;
		count++;
	}
	closedir(dp);
	*ns = want;
	return want && count == want;
}

/* The steps of the step-T directories under @dir, largest first. */
static int snap_steps(const char *dir, uint64_t **out, size_t *n)
{
	unsigned long long t;
	struct dirent *d;
	uint64_t *v = NULL, *nv, x;
	size_t cnt = 0, cap = 0, i, j;
	int used;
	DIR *dp = opendir(dir);

	if (!dp)
		return psd_set_errmsg(-errno, "snapshot directory %s: %s", dir,
				      strerror(errno));
	while ((d = readdir(dp))) {
		used = 0;
		if (sscanf(d->d_name, "step-%llu%n", &t, &used) != 1 ||
		    d->d_name[used])
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(dp);
				return -ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = t;
	}
	closedir(dp);
	for (i = 1; i < cnt; i++)
		for (j = i; j > 0 && v[j - 1] < v[j]; j--) {
			x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	*out = v;
	*n = cnt;
	return 0;
}

/* Read every file of the step directory @sdir (@ns servers). */
static int snap_load_step(const char *sdir, uint64_t step, uint32_t ns,
			  const struct psd_auth_secret *sec,
			  struct psd_snap_set *set)
{
	char path[4300];
	uint32_t i;
	int ret = 0;

	set->files = calloc(ns, sizeof(*set->files));
	if (!set->files)
		return psd_set_errmsg(-ENOMEM, "snapshot: no memory");
	set->nservers = ns;
	set->step = step;
	snprintf(set->dir, sizeof(set->dir), "%s", sdir);
	for (i = 0; i < ns && !ret; i++) {
		snprintf(path, sizeof(path), "%s/server-%u-of-%u.psnap", sdir,
			 i, ns);
		ret = psd_snap_file_read(path, sec, &set->files[i]);
		if (!ret &&
		    (set->files[i].step != step || set->files[i].server != i ||
		     set->files[i].nservers != ns))
			ret = psd_set_errmsg(
				-EPROTO,
				"snapshot %s: its header says step %llu, "
				"server %u of %u",
				path, (unsigned long long)set->files[i].step,
				set->files[i].server, set->files[i].nservers);
	}
	if (ret)
		psd_snap_close(set);
	return ret;
}

int psd_snap_open(const char *dir, const struct psd_auth_secret *sec,
		  struct psd_snap_set *set)
{
	unsigned long long t;
	const char *base = strrchr(dir, '/');
	char sdir[4200];
	uint64_t *steps = NULL;
	size_t n = 0, i;
	uint32_t ns;
	int ret, used = 0;

	memset(set, 0, sizeof(*set));
	base = base ? base + 1 : dir;
	if (sscanf(base, "step-%llu%n", &t, &used) == 1 && !base[used]) {
		if (!snap_step_complete(dir, &ns))
			return psd_set_errmsg(-ENOENT,
					      "snapshot %s: files are missing "
					      "(not every server's file of "
					      "the step is there)",
					      dir);
		return snap_load_step(dir, t, ns, sec, set);
	}
	ret = snap_steps(dir, &steps, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		snap_step_dir(sdir, sizeof(sdir), dir, steps[i]);
		if (snap_step_complete(sdir, &ns))
			break;
		psd_warn("snapshot %s: not complete (a server's file is "
			 "missing), an older one is taken",
			 sdir);
	}
	if (i == n) {
		free(steps);
		return psd_set_errmsg(-ENOENT,
				      "no complete snapshot in %s (%zu step "
				      "directories, none with every "
				      "server's file)",
				      dir, n);
	}
	ret = snap_load_step(sdir, steps[i], ns, sec, set);
	free(steps);
	return ret;
}
