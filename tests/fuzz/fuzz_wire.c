// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: the data-plane header decoder (common/wire.c).  Any
 * 96 bytes and any limit: the decoder must not crash, and what it accepts
 * must satisfy the framing rules it promises (common/wire.h) and survive
 * an encode/decode round trip unchanged.
 */
#include "fuzz_util.h"

static uint64_t fz_get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The key-list rules (common/wire.h, PSD_F_KEYLIST), restated: true if
 * accepted header @h breaks one. */
static bool fz_keylist_bad(const struct psd_hdr *h, unsigned es, uint64_t max)
{
	bool push = psd_msg_is_push(h->type);
	bool cached = h->flags & PSD_F_KLCACHED;
	bool packed = h->flags & PSD_F_KLPACKED;
	unsigned __int128 want;

	if (!(h->flags & PSD_F_KEYLIST) || h->type == PSD_MSG_INIT ||
	    h->type == PSD_MSG_CONTROL || h->total != h->span || h->span % es)
		return true;
	if (h->type == PSD_MSG_PUSH_ACK)
		return h->length != 0 || cached || packed;
	if (h->type == PSD_MSG_PULL_RESP)
		return cached || packed || h->span > max ||
		       h->length != (h->status ? 0 : h->span);
	if (cached && !h->epoch)
		return true;
	if (h->offset && (unsigned __int128)h->part * h->offset * es != h->span)
		return true;
	if (packed) {
		/* lengths and values fit; the section's rest is checked when
		 * unpacked: a multiple of 8, at least 17 bytes per block + 7 */
		unsigned __int128 fixed =
			(push ? h->span : 0) +
			(h->offset ? 0 : (unsigned __int128)4 * h->part);
		unsigned __int128 nblk =
			((unsigned __int128)h->part + 255) / 256;

		if (cached || !h->part || fixed > h->length)
			return true;
		return (h->length - fixed) % 8 ||
		       h->length - fixed <
			       ((17 * nblk + 7 + 7) & ~(unsigned __int128)7);
	}
	want = (unsigned __int128)h->part * (cached	 ? 0
					     : h->offset ? 8
							 : 12) +
	       (push ? h->span : 0);
	return want != h->length;
}

/* The raw-family rules (common/wire.h, PSD_F_RAW), restated: true if
 * accepted header @h breaks one. */
static bool fz_raw_bad(const struct psd_hdr *h, uint64_t max)
{
	unsigned __int128 want;

	if (h->flags != PSD_F_RAW || h->type == PSD_MSG_INIT ||
	    h->type == PSD_MSG_CONTROL || h->offset > 3 || h->total != h->span)
		return true;
	/* keys left out: only in a pull answer */
	if ((h->offset & 2) && h->type != PSD_MSG_PULL_RESP)
		return true;
	if (h->type == PSD_MSG_PUSH_ACK ||
	    (h->type == PSD_MSG_PULL_RESP && h->status))
		return h->length != 0;
	if ((h->type == PSD_MSG_PULL && h->span) ||
	    (h->type == PSD_MSG_PULL_RESP && h->span > max))
		return true;
	want = (unsigned __int128)h->part *
		       ((h->offset & 2 ? 0 : 8) + (h->offset & 1 ? 4 : 0)) +
	       h->span;
	return want != h->length;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr h, h2;
	uint64_t max;
	const char *why;
	unsigned es;

	if (size < PSD_HDR_SIZE + 8)
		return 0;
	memcpy(buf, data, PSD_HDR_SIZE);
	max = fz_get64(data + PSD_HDR_SIZE);
	if (psd_hdr_decode(buf, max, &h, &why)) {
		if (!why || !*why)
			abort(); /* a refusal always says why */
		return 0;
	}
	es = psched_dtype_size((enum psched_dtype)h.dtype);
	if (h.type < 1 || h.type > PSD_MSG_TYPE_MAX || h.status > 0)
		abort();
	if (h.flags & PSD_F_RAW) {
		if (fz_raw_bad(&h, max))
			abort();
	} else if (h.flags &
		   (PSD_F_KEYLIST | PSD_F_KLCACHED | PSD_F_KLPACKED)) {
		if (fz_keylist_bad(&h, es, max))
			abort();
	} else if (h.type != PSD_MSG_CONTROL) {
		if (!h.total || h.offset > h.total ||
		    h.span > h.total - h.offset)
			abort();
		if (h.total % es || h.offset % es || h.span % es || h.part % es)
			abort();
		if (h.total > max && !psd_msg_is_request(h.type))
			abort();
	} else if (h.length > PSD_MAX_CONTROL) {
		abort();
	}
	/* A row-sparse message (PSD_F_ROWS): whole rows of part bytes, a
	 * push or pushpull carrying the prefix and (id, row) pairs, never an
	 * ack. */
	if ((h.flags & PSD_F_ROWS) &&
	    (!h.part || h.total % h.part || h.offset % h.part ||
	     h.span % h.part || (h.flags & PSD_F_COMPRESSED) ||
	     h.type == PSD_MSG_PUSH_ACK ||
	     (psd_msg_is_push(h.type) &&
	      (h.length < PSD_ROWS_PREFIX ||
	       (h.length - PSD_ROWS_PREFIX) % (8 + h.part)))))
		abort();
	/* (A compressed push carries its codec's length, checked by
	 * hdr_check_length() against the codecs.) */
	if (psd_msg_is_push(h.type) &&
	    !(h.flags &
	      (PSD_F_COMPRESSED | PSD_F_KEYLIST | PSD_F_ROWS | PSD_F_RAW)) &&
	    h.length != h.span)
		abort();
	psd_hdr_encode(&h, buf);
	if (memcmp(buf, data, PSD_HDR_SIZE))
		abort(); /* every accepted header is its own encoding */
	if (psd_hdr_decode(buf, max, &h2, &why) || memcmp(&h, &h2, sizeof(h)))
		abort();
	return 0;
}
