/*
 * wire.h -- the pcor wire header (DESIGN.md section 6).
 *
 * Every fabric message starts with this fixed 64-byte header, little-endian,
 * version byte first.  Decoding never trusts a byte: pcori_wire_decode
 * checks version, job key, type, lengths and fragment numbers and says
 * which check failed, so bad headers are counted and dropped.
 *
 * Byte layout (offsets):
 *   0 version  1 type  2 flags  3 hops
 *   4 key_check (u32)
 *   8 src_pid  12 src_thid  16 dst_pid  20 dst_thid  24 tag (i32 each)
 *  28 ctx  32 seq  36 frag_idx  40 frag_count  44 frag_len (u32 each)
 *  48 total_size (u64)  56 cookie (u64)
 */
#ifndef PCOR_WIRE_H
#define PCOR_WIRE_H

#include "../core/core.h"

#define PCORI_WIRE_VERSION 2
#define PCORI_WIRE_HDR_SIZE 64
#define PCORI_WIRE_MAX_HOPS 16

typedef enum pcori_wire_type {
	PCORI_W_DATA = 1, /* a fragment of an eager or streamed message */
	PCORI_W_RTS,      /* rendezvous: request to send (payload: rts) */
	PCORI_W_CTS,      /* rendezvous: send window frag_idx (streaming) */
	PCORI_W_ACK,      /* stream/window acknowledgement */
	PCORI_W_NACK,     /* refused for lack of resources: resend later */
	PCORI_W_FIN,      /* rendezvous: receiver has all the data */
	PCORI_W_CTRL,     /* control: remote thread spawn and its answer */
	PCORI_W_FINACK,   /* rendezvous: the sender has the FIN (cookie) */
	PCORI_W_TYPE_MAX_
} pcori_wire_type_t;

/* Flags. */
#define PCORI_WF_RNDV 0x01u /* DATA belongs to a rendezvous (cookie) */
#define PCORI_WF_HAS_ACK 0x02u /* an ack rides in the cookie */
#define PCORI_WF_RESYNC 0x04u  /* first message after the sender failed
				  the stream's earlier ones: start here */
#define PCORI_WF_FAST 0x08u    /* lossless fast path: the sender keeps no
				  copy, so it can be neither refused nor
				  resent; acknowledged only in batches */

/* Decoded header, in host order. */
typedef struct pcori_wire_hdr {
	uint8_t version, type, flags, hops;
	uint32_t key_check;
	int32_t src_pid, src_thid, dst_pid, dst_thid, tag;
	uint32_t ctx, seq, frag_idx, frag_count, frag_len;
	uint64_t total_size;
	uint64_t cookie;
} pcori_wire_hdr_t;

/* Rendezvous request body (after the header), little-endian. */
typedef struct pcori_wire_rts {
	uint64_t addr;  /* remote address or offset for fi_read; 0: stream */
	uint64_t key;   /* memory key */
	uint32_t flags; /* PCORI_RTS_* */
	uint32_t pad;
} pcori_wire_rts_t;
#define PCORI_WIRE_RTS_SIZE 24
#define PCORI_RTS_READABLE 0x1u /* addr/key valid: the receiver may fi_read */

/* Why a header was refused (0: valid). */
typedef enum pcori_wire_err {
	PCORI_WE_OK = 0,
	PCORI_WE_SHORT,     /* fewer bytes than a header */
	PCORI_WE_VERSION,
	PCORI_WE_KEY,
	PCORI_WE_TYPE,
	PCORI_WE_HOPS,
	PCORI_WE_IDS,       /* pid/thid/tag out of range */
	PCORI_WE_FRAG,      /* fragment index/count inconsistent */
	PCORI_WE_LEN,       /* payload length inconsistent */
	PCORI_WE_COUNT_
} pcori_wire_err_t;

/* Limits the receiver checks against. */
typedef struct pcori_wire_limits {
	uint32_t key_check;
	int32_t nprocs;      /* pids must be below */
	int32_t max_threads; /* thids must be below */
	uint32_t frag_size;  /* largest fragment payload */
} pcori_wire_limits_t;

void pcori_wire_encode(const pcori_wire_hdr_t *h, void *buf);
/*
 * Decode and validate len bytes at buf.  On PCORI_WE_OK, *h is filled and
 * the payload is buf + PCORI_WIRE_HDR_SIZE with h->frag_len bytes.
 */
pcori_wire_err_t pcori_wire_decode(const void *buf, size_t len,
				   const pcori_wire_limits_t *lim,
				   pcori_wire_hdr_t *h);
const char *pcori_wire_err_str(pcori_wire_err_t e);

/* Little-endian 32-bit fields of control bodies. */
static inline void pcori_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t pcori_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void pcori_wire_rts_encode(const pcori_wire_rts_t *r, void *buf);
void pcori_wire_rts_decode(const void *buf, pcori_wire_rts_t *r);

#endif /* PCOR_WIRE_H */
