// SPDX-License-Identifier: MIT
#include <string.h>

#include "compress.h"
#include "internal.h"
#include "klpack.h"
#include "wire.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void psd_hdr_encode(const struct psd_hdr *h, uint8_t *buf)
{
	put32(buf + 0, PSD_HDR_MAGIC);
	buf[4] = PSD_HDR_VERSION;
	buf[5] = h->type;
	buf[6] = h->dtype;
	buf[7] = h->flags;
	put32(buf + 8, (uint32_t)h->sender);
	put32(buf + 12, (uint32_t)h->status);
	put64(buf + 16, h->key);
	put64(buf + 24, h->total);
	put64(buf + 32, h->offset);
	put64(buf + 40, h->span);
	put64(buf + 48, h->length);
	put64(buf + 56, h->part);
	put64(buf + 64, h->step);
	put64(buf + 72, h->req);
	put32(buf + 80, h->slot);
	put32(buf + 84, h->epoch);
	put32(buf + 88, (uint32_t)h->priority);
	put32(buf + 92, 0);
}

const char *psd_msg_type_name(unsigned type)
{
	static const char *const names[] = {
		"?",	    "control",	"push",	     "pull",
		"pushpull", "push-ack", "pull-resp", "init",
	};

	return type <= PSD_MSG_TYPE_MAX ? names[type] : "?";
}

/* The same for a row-sparse message (wire.h, PSD_F_ROWS); the row ids
 * themselves are checked by the server (psd_rows_check()). */
static int hdr_check_rows(const struct psd_hdr *h, const char **why)
{
	uint64_t rb = h->part;

	*why = "malformed row-sparse message";
	if (h->flags & (PSD_F_COMPRESSED | PSD_F_HAS_VALUE))
		return -EPROTO;
	if (!rb || h->total % rb || h->offset % rb || h->span % rb) {
		*why = "row-sparse sizes not a multiple of the row size";
		return -EPROTO;
	}
	switch (h->type) {
	case PSD_MSG_PUSH:
	case PSD_MSG_PUSHPULL:
		if (h->length < PSD_ROWS_PREFIX ||
		    (h->length - PSD_ROWS_PREFIX) % (8 + rb))
			return -EPROTO;
		return 0;
	case PSD_MSG_PULL:
		if (h->length < PSD_ROWS_PREFIX ||
		    (h->length - PSD_ROWS_PREFIX) % 8)
			return -EPROTO;
		return 0;
	case PSD_MSG_PULL_RESP:
		if (h->length % rb || (h->status && h->length))
			return -EPROTO;
		return 0;
	case PSD_MSG_INIT:
		return h->length ? -EPROTO : 0;
	default:
		*why = "row-sparse flag on an ack or control message";
		return -EPROTO;
	}
}

/* Payload length a well-formed message of this type must carry. */
static int hdr_check_length(const struct psd_hdr *h, const char **why)
{
	if (h->flags & PSD_F_ROWS)
		return hdr_check_rows(h, why);
	switch (h->type) {
	case PSD_MSG_CONTROL:
		if (h->length > PSD_MAX_CONTROL) {
			*why = "control message larger than 1 MiB";
			return -EPROTO;
		}
		return 0;
	case PSD_MSG_PUSH:
	case PSD_MSG_PUSHPULL:
		if (h->flags & PSD_F_COMPRESSED) {
			if (h->dtype != PSCHED_F32 ||
			    (h->length !=
				     psd_cmp_len(PSD_CMP_2BIT, h->span / 4) &&
			     h->length !=
				     psd_cmp_len(PSD_CMP_1BIT, h->span / 4))) {
				*why = "compressed push of another dtype, or "
				       "of a length that fits no codec";
				return -EPROTO;
			}
			return 0;
		}
		if (h->length != h->span) {
			*why = "push payload length differs from its span";
			return -EPROTO;
		}
		return 0;
	case PSD_MSG_INIT:
		if ((h->flags & PSD_F_HAS_VALUE) ? h->length != h->span
						 : h->length != 0) {
			*why = "init payload length differs from its span";
			return -EPROTO;
		}
		return 0;
	case PSD_MSG_PULL_RESP:
		if (h->length != (h->status ? 0 : h->span)) {
			*why = "pull response length differs from its span";
			return -EPROTO;
		}
		return 0;
	default: /* PULL, PUSH_ACK */
		if (h->length != 0) {
			*why = "message type carries no payload";
			return -EPROTO;
		}
		return 0;
	}
}

/* A key-list request with packed keys (PSD_F_KLPACKED): what follows
 * the packed section fits in length, and the section is long enough for
 * its key count (the rest is checked as it is unpacked). */
static int hdr_check_klpacked(const struct psd_hdr *h, bool push,
			      const char **why)
{
	uint64_t fixed = push ? h->span : 0, sec;

	if (!h->offset) {
		if (h->part > (UINT64_MAX - fixed) / 4)
			return -EPROTO;
		fixed += h->part * 4;
	}
	if (h->length < fixed)
		return -EPROTO;
	sec = h->length - fixed;
	if (sec % 8 || sec < psd_klpack_min_len(h->part)) {
		*why = "packed key section too short or not a multiple of 8";
		return -EPROTO;
	}
	return 0;
}

/* A key-list message (PSD_F_KEYLIST, wire.h): its own rules instead of
 * hdr_check_length() and hdr_check_range(). */
static int hdr_check_keylist(const struct psd_hdr *h, uint64_t max_tensor,
			     const char **why)
{
	unsigned esize = psched_dtype_size((enum psched_dtype)h->dtype);
	bool push = psd_msg_is_push(h->type);
	bool cached = h->flags & PSD_F_KLCACHED;
	bool packed = h->flags & PSD_F_KLPACKED;
	uint64_t per = cached ? 0 : h->offset ? 8 : 12, want;

	*why = "key-list message with inconsistent sizes";
	if (h->type == PSD_MSG_INIT || h->type == PSD_MSG_CONTROL ||
	    !(h->flags & PSD_F_KEYLIST) ||
	    (h->flags & ~(PSD_F_KEYLIST | PSD_F_KLCACHED | PSD_F_KLPACKED)) ||
	    (cached && (!h->epoch || !psd_msg_is_request(h->type))) ||
	    (packed && (cached || !h->part || !psd_msg_is_request(h->type))))
		return -EPROTO;
	if (h->total != h->span || h->span % esize)
		return -EPROTO;
	if (h->type == PSD_MSG_PUSH_ACK)
		return h->length ? -EPROTO : 0;
	if (h->type == PSD_MSG_PULL_RESP) {
		if (h->span > max_tensor)
			return -EPROTO;
		return h->length != (h->status ? 0 : h->span) ? -EPROTO : 0;
	}
	/* requests: n keys, maybe n lengths, maybe the values */
	if (per && h->part > (UINT64_MAX - h->span) / per)
		return -EPROTO;
	if (h->offset &&
	    (h->offset > UINT32_MAX ||
	     (unsigned __int128)h->part * h->offset * esize != h->span))
		return -EPROTO;
	if (packed)
		return hdr_check_klpacked(h, push, why);
	want = h->part * per + (push ? h->span : 0);
	if (h->length != want)
		return -EPROTO;
	return 0;
}

/* A raw-family message (PSD_F_RAW, wire.h). */
static int hdr_check_raw(const struct psd_hdr *h, uint64_t max_tensor,
			 const char **why)
{
	uint64_t per = (h->offset & PSD_RAW_ASKED ? 0 : 8) +
		       (h->offset & PSD_RAW_LENS ? 4 : 0);

	*why = "raw message with inconsistent sizes";
	if (h->type == PSD_MSG_INIT || h->type == PSD_MSG_CONTROL ||
	    h->flags != PSD_F_RAW || h->total != h->span ||
	    h->offset > (PSD_RAW_LENS | PSD_RAW_ASKED) ||
	    (h->offset & PSD_RAW_ASKED && h->type != PSD_MSG_PULL_RESP))
		return -EPROTO;
	if (h->type == PSD_MSG_PUSH_ACK)
		return h->length ? -EPROTO : 0;
	if (h->type == PSD_MSG_PULL && h->span)
		return -EPROTO;
	if (h->type == PSD_MSG_PULL_RESP && h->status)
		return h->length ? -EPROTO : 0;
	if (h->type == PSD_MSG_PULL_RESP && h->span > max_tensor)
		return -EPROTO;
	if ((per && h->part > (UINT64_MAX - h->span) / per) ||
	    h->length != h->part * per + h->span)
		return -EPROTO;
	return 0;
}

static int hdr_check_range(const struct psd_hdr *h, uint64_t max_tensor,
			   const char **why)
{
	unsigned esize = psched_dtype_size((enum psched_dtype)h->dtype);

	if (h->type == PSD_MSG_CONTROL)
		return 0;
	/* A request over the limit is framed well: the receiver refuses that
	 * one request and reads its payload into nothing (psd_van_rx_header),
	 * so the connection goes on. */
	if (h->total == 0 ||
	    (h->total > max_tensor && !psd_msg_is_request(h->type))) {
		*why = "tensor size is zero or above PS_MAX_TENSOR_BYTES";
		return -EPROTO;
	}
	if (h->offset > h->total || h->span > h->total - h->offset) {
		*why = "offset+span beyond the tensor";
		return -EPROTO;
	}
	if (h->total % esize || h->offset % esize || h->span % esize ||
	    h->part % esize) {
		*why = "sizes not a multiple of the element size";
		return -EPROTO;
	}
	return 0;
}

int psd_hdr_decode(const uint8_t *buf, uint64_t max_tensor, struct psd_hdr *h,
		   const char **why)
{
	*why = "";
	if (get32(buf) != PSD_HDR_MAGIC) {
		*why = "bad magic (not a psched peer)";
		return -EPROTO;
	}
	if (buf[4] != PSD_HDR_VERSION) {
		*why = "unsupported protocol version";
		return -EPROTO;
	}
	memset(h, 0, sizeof(*h));
	h->type = buf[5];
	h->dtype = buf[6];
	h->flags = buf[7];
	h->sender = (int32_t)get32(buf + 8);
	h->status = (int32_t)get32(buf + 12);
	h->key = get64(buf + 16);
	h->total = get64(buf + 24);
	h->offset = get64(buf + 32);
	h->span = get64(buf + 40);
	h->length = get64(buf + 48);
	h->part = get64(buf + 56);
	h->step = get64(buf + 64);
	h->req = get64(buf + 72);
	h->slot = get32(buf + 80);
	h->epoch = get32(buf + 84);
	h->priority = (int32_t)get32(buf + 88);
	if (h->type < 1 || h->type > PSD_MSG_TYPE_MAX) {
		*why = "unknown message type";
		return -EPROTO;
	}
	if (h->dtype > PSCHED_DTYPE_MAX) {
		*why = "unknown dtype";
		return -EPROTO;
	}
	if ((h->flags & PSD_F_COMPRESSED) && !psd_msg_is_push(h->type)) {
		*why = "compressed flag on a message that is no push";
		return -EPROTO;
	}
	if (h->flags & ~PSD_F_ALL) {
		*why = "unknown flags";
		return -EPROTO;
	}
	if (get32(buf + 92) != 0) {
		*why = "reserved bytes not zero";
		return -EPROTO;
	}
	if (h->status > 0 || (h->status && psd_msg_is_request(h->type))) {
		*why = "status set on a request, or positive";
		return -EPROTO;
	}
	if (h->flags & PSD_F_RAW)
		return hdr_check_raw(h, max_tensor, why);
	if (h->flags & (PSD_F_KEYLIST | PSD_F_KLCACHED | PSD_F_KLPACKED))
		return hdr_check_keylist(h, max_tensor, why);
	if (hdr_check_length(h, why))
		return -EPROTO;
	return hdr_check_range(h, max_tensor, why);
}

unsigned psched_dtype_size(enum psched_dtype dtype)
{
	switch (dtype) {
	case PSCHED_F16:
	case PSCHED_BF16:
		return 2;
	case PSCHED_F32:
	case PSCHED_I32:
		return 4;
	case PSCHED_F64:
	case PSCHED_I64:
		return 8;
	default:
		return 1;
	}
}

const char *psched_dtype_name(enum psched_dtype dtype)
{
	static const char *const names[] = {
		"raw",	 "float32", "float64",	"int32",
		"int64", "float16", "bfloat16",
	};

	return (unsigned)dtype < PSD_ARRAY_SIZE(names) ? names[dtype] : "?";
}
