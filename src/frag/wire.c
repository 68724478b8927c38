/*
 * wire.c -- encoding and validating the wire header.  Explicit
 * little-endian byte access: no struct overlays, so neither host byte
 * order nor alignment of the receive buffer matter.
 */
#include "wire.h"
#include "frag.h"

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}
static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void pcori_wire_encode(const pcori_wire_hdr_t *h, void *buf)
{
	uint8_t *p = buf;
	p[0] = h->version;
	p[1] = h->type;
	p[2] = h->flags;
	p[3] = h->hops;
	put32(p + 4, h->key_check);
	put32(p + 8, (uint32_t)h->src_pid);
	put32(p + 12, (uint32_t)h->src_thid);
	put32(p + 16, (uint32_t)h->dst_pid);
	put32(p + 20, (uint32_t)h->dst_thid);
	put32(p + 24, (uint32_t)h->tag);
	put32(p + 28, h->ctx);
	put32(p + 32, h->seq);
	put32(p + 36, h->frag_idx);
	put32(p + 40, h->frag_count);
	put32(p + 44, h->frag_len);
	put64(p + 48, h->total_size);
	put64(p + 56, h->cookie);
}

static bool id_ok(int32_t v, int32_t limit)
{
	return v >= 0 && v < limit;
}

pcori_wire_err_t pcori_wire_decode(const void *buf, size_t len,
				   const pcori_wire_limits_t *lim,
				   pcori_wire_hdr_t *h)
{
	const uint8_t *p = buf;
	if (len < PCORI_WIRE_HDR_SIZE)
		return PCORI_WE_SHORT;
	h->version = p[0];
	if (h->version != PCORI_WIRE_VERSION)
		return PCORI_WE_VERSION;
	h->type = p[1];
	h->flags = p[2];
	h->hops = p[3];
	h->key_check = get32(p + 4);
	if (h->key_check != lim->key_check)
		return PCORI_WE_KEY;
	if (h->type == 0 || h->type >= PCORI_W_TYPE_MAX_)
		return PCORI_WE_TYPE;
	if (h->hops > PCORI_WIRE_MAX_HOPS)
		return PCORI_WE_HOPS;
	h->src_pid = (int32_t)get32(p + 8);
	h->src_thid = (int32_t)get32(p + 12);
	h->dst_pid = (int32_t)get32(p + 16);
	h->dst_thid = (int32_t)get32(p + 20);
	h->tag = (int32_t)get32(p + 24);
	h->ctx = get32(p + 28);
	h->seq = get32(p + 32);
	h->frag_idx = get32(p + 36);
	h->frag_count = get32(p + 40);
	h->frag_len = get32(p + 44);
	h->total_size = get64(p + 48);
	h->cookie = get64(p + 56);
	if (!id_ok(h->src_pid, lim->nprocs) || !id_ok(h->dst_pid, lim->nprocs) ||
	    !id_ok(h->src_thid, lim->max_threads) ||
	    !id_ok(h->dst_thid, lim->max_threads) || h->tag < 0)
		return PCORI_WE_IDS;
	size_t payload = len - PCORI_WIRE_HDR_SIZE;
	switch (h->type) {
	case PCORI_W_DATA: {
		/* Fragment geometry must follow from size and fragment size. */
		if (h->total_size > (uint64_t)SSIZE_MAX ||
		    h->frag_count !=
			    pcori_frag_count(h->total_size, lim->frag_size) ||
		    h->frag_idx >= h->frag_count)
			return PCORI_WE_FRAG;
		size_t off, flen;
		pcori_frag_bounds(h->total_size, lim->frag_size, h->frag_idx,
				  &off, &flen);
		if (h->frag_len != flen || payload != flen)
			return PCORI_WE_LEN;
		break;
	}
	case PCORI_W_RTS:
		if (h->total_size > (uint64_t)SSIZE_MAX)
			return PCORI_WE_FRAG;
		if (h->frag_len != PCORI_WIRE_RTS_SIZE ||
		    payload != PCORI_WIRE_RTS_SIZE)
			return PCORI_WE_LEN;
		break;
	case PCORI_W_CTRL:
		if (h->frag_len != payload || payload > lim->frag_size)
			return PCORI_WE_LEN;
		break;
	case PCORI_W_CTS:
		if (h->frag_count !=
		    pcori_frag_count(h->total_size, lim->frag_size))
			return PCORI_WE_FRAG;
		/* fall through */
	default: /* ACK, NACK, FIN, FINACK carry no payload */
		if (h->frag_len != 0 || payload != 0)
			return PCORI_WE_LEN;
		break;
	}
	return PCORI_WE_OK;
}

const char *pcori_wire_err_str(pcori_wire_err_t e)
{
	static const char *const s[PCORI_WE_COUNT_] = {
		"ok", "short", "version", "job key", "type",
		"hop count", "ids", "fragment numbers", "length"};
	return (unsigned)e < PCORI_WE_COUNT_ ? s[e] : "?";
}

void pcori_wire_rts_encode(const pcori_wire_rts_t *r, void *buf)
{
	uint8_t *p = buf;
	put64(p, r->addr);
	put64(p + 8, r->key);
	put32(p + 16, r->flags);
	put32(p + 20, 0);
}

void pcori_wire_rts_decode(const void *buf, pcori_wire_rts_t *r)
{
	const uint8_t *p = buf;
	r->addr = get64(p);
	r->key = get64(p + 8);
	r->flags = get32(p + 16);
	r->pad = 0;
}
