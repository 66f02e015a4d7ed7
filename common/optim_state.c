// SPDX-License-Identifier: MIT
/*
 * Optimizer state records and files (common/optim.h; the format is
 * described in docs/optimizers.md).  Integers are little-endian;
 * state arrays are the host's float32/float64, so files move between
 * little-endian hosts (the only ones psched builds for).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "internal.h"
#include "optim.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "optimizer state files assume a little-endian host"
#endif

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

uint64_t psd_opt_rec_size(uint64_t n, unsigned nstate, bool master,
			  unsigned esize)
{
	return PSD_OPT_REC_HDR +
	       n * ((uint64_t)nstate * esize + (master ? 4u : 0u) + 4u);
}

void psd_opt_rec_put_hdr(uint8_t *buf, const struct psd_opt_rec *r)
{
	put64(buf, r->key);
	put64(buf + 8, r->total);
	put64(buf + 16, r->off);
	put64(buf + 24, r->len);
	buf[32] = r->dtype;
	buf[33] = r->nstate;
	buf[34] = r->master;
	buf[35] = r->esize;
	memset(buf + 36, 0, 4);
}

int psd_opt_rec_parse(const uint8_t *buf, size_t len, struct psd_opt_rec *r,
		      size_t *used)
{
	unsigned es, k;
	uint64_t sz;
	const uint8_t *p;

	if (len < PSD_OPT_REC_HDR)
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: truncated record "
				      "(%zu bytes left)",
				      len);
	memset(r, 0, sizeof(*r));
	r->key = get64(buf);
	r->total = get64(buf + 8);
	r->off = get64(buf + 16);
	r->len = get64(buf + 24);
	r->dtype = buf[32];
	r->nstate = buf[33];
	r->master = buf[34];
	r->esize = buf[35];
	es = psched_dtype_size((enum psched_dtype)r->dtype);
	if (r->dtype < PSCHED_F32 || r->dtype > PSCHED_DTYPE_MAX ||
	    r->dtype == PSCHED_I32 || r->dtype == PSCHED_I64 ||
	    r->nstate > PSD_OPT_MAX_STATE || r->master > 1 ||
	    (r->esize != 4 && r->esize != 8) || r->len % es || r->off % es ||
	    r->off + r->len < r->off ||
	    (r->total && r->off + r->len > r->total) ||
	    buf[36] | buf[37] | buf[38] | buf[39])
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: bad record header "
				      "(key %llu)",
				      (unsigned long long)r->key);
	r->n = r->len / es;
	if (r->n > (1ull << 40))
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: record of key %llu "
				      "too large",
				      (unsigned long long)r->key);
	sz = psd_opt_rec_size(r->n, r->nstate, r->master, r->esize);
	if (sz > len)
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: record of key %llu "
				      "needs %llu bytes, %zu left",
				      (unsigned long long)r->key,
				      (unsigned long long)sz, len);
	p = buf + PSD_OPT_REC_HDR;
	for (k = 0; k < r->nstate; k++, p += r->n * r->esize)
		r->arr[k] = p;
	if (r->master) {
		r->arr[k] = p;
		p += r->n * 4;
	}
	r->cnt = p;
	*used = (size_t)sz;
	return 0;
}

static int opt_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t r;

	while (len) {
		r = write(fd, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return psd_neg_errno();
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int psd_opt_file_write(const char *path, const char *name, const void *recs,
		       size_t len)
{
	uint8_t hdr[PSD_OPT_FILE_HDR] = { 0 };
	uint8_t tail[4];
	uint32_t crc, ver = PSD_OPT_FILE_VERSION;
	char *tmp;
	int fd, ret;

	memcpy(hdr, PSD_OPT_FILE_MAGIC, 8);
	memcpy(hdr + 8, &ver, 4);
	strncpy((char *)hdr + 12, name, 15);
	crc = psd_crc32_more(psd_crc32(hdr, sizeof(hdr)), recs, len);
	memcpy(tail, &crc, 4);
	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return psd_set_errmsg(-ENOMEM, "no memory for a file name");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = psd_neg_errno();
		psd_set_errmsg(ret, "cannot create %s: %s", tmp,
			       psched_strerror(ret));
		free(tmp);
		return ret;
	}
	ret = opt_write_all(fd, hdr, sizeof(hdr));
	if (!ret && len)
		ret = opt_write_all(fd, recs, len);
	if (!ret)
		ret = opt_write_all(fd, tail, 4);
	if (!ret && fsync(fd))
		ret = psd_neg_errno();
	if (ret) {
		psd_set_errmsg(ret, "cannot write %s: %s", tmp,
			       psched_strerror(ret));
		goto err_close;
	}
	close(fd);
	if (rename(tmp, path)) {
		ret = psd_neg_errno();
		psd_set_errmsg(ret, "cannot rename %s to %s: %s", tmp, path,
			       psched_strerror(ret));
		unlink(tmp);
		free(tmp);
		return ret;
	}
	free(tmp);
	return 0;

err_close:
	close(fd);
	unlink(tmp);
	free(tmp);
	return ret;
}

int psd_opt_file_read(const char *path, uint8_t **bufp, const uint8_t **recs,
		      size_t *len, char name[16])
{
	struct stat sb;
	uint8_t *buf;
	size_t got = 0, size;
	uint32_t crc, ver;
	ssize_t r;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = psd_neg_errno();
		return psd_set_errmsg(ret, "cannot open %s: %s", path,
				      psched_strerror(ret));
	}
	if (fstat(fd, &sb)) {
		ret = psd_neg_errno();
		close(fd);
		return psd_set_errmsg(ret, "cannot stat %s", path);
	}
	size = (size_t)sb.st_size;
	if (size < PSD_OPT_FILE_HDR + 4) {
		close(fd);
		return psd_set_errmsg(-EPROTO,
				      "%s: %zu bytes is too short for an "
				      "optimizer state file",
				      path, size);
	}
	buf = malloc(size);
	if (!buf) {
		close(fd);
		return psd_set_errmsg(-ENOMEM, "no memory to read %s", path);
	}
	while (got < size) {
		r = read(fd, buf + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got != size) {
		free(buf);
		return psd_set_errmsg(-EIO, "cannot read %s", path);
	}
	memcpy(&ver, buf + 8, 4);
	memcpy(&crc, buf + size - 4, 4);
	if (memcmp(buf, PSD_OPT_FILE_MAGIC, 8) || ver != PSD_OPT_FILE_VERSION ||
	    buf[PSD_OPT_FILE_HDR - 1] != 0) {
		free(buf);
		return psd_set_errmsg(-EPROTO,
				      "%s is not a version %u psched optimizer "
				      "state file",
				      path, PSD_OPT_FILE_VERSION);
	}
	if (psd_crc32(buf, size - 4) != crc) {
		free(buf);
		return psd_set_errmsg(-EPROTO,
				      "%s: checksum mismatch (file corrupt "
				      "or truncated)",
				      path);
	}
	memcpy(name, buf + 12, 16);
	*bufp = buf;
	*recs = buf + PSD_OPT_FILE_HDR;
	*len = size - PSD_OPT_FILE_HDR - 4;
	return 0;
}
