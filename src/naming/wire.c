/*
 * wire.c -- control-protocol frames: building them and reading them back.
 *
 * Everything is big-endian.  Readers never trust a length: each read is
 * bounded by what the frame holds, and the first overrun latches err so a
 * handler checks once, at the end (pcori_r_done).
 */
#include "naming_priv.h"

#include <arpa/inet.h>

void pcori_wbuf_free(pcori_wbuf_t *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

static bool wbuf_reserve(pcori_wbuf_t *w, size_t n)
{
	if (w->err)
		return false;
	if (w->len + n <= w->cap)
		return true;
	size_t cap = w->cap ? w->cap : 256;
	while (cap < w->len + n)
		cap *= 2;
	uint8_t *p = realloc(w->p, cap);
	if (!p) {
		w->err = true;
		return false;
	}
	w->p = p;
	w->cap = cap;
	return true;
}

void pcori_w_bytes(pcori_wbuf_t *w, const void *b, size_t n)
{
	if (!n || !wbuf_reserve(w, n))
		return;
	memcpy(w->p + w->len, b, n);
	w->len += n;
}

void pcori_w_u8(pcori_wbuf_t *w, uint8_t v)
{
	pcori_w_bytes(w, &v, 1);
}

void pcori_w_u16(pcori_wbuf_t *w, uint16_t v)
{
	uint16_t be = htons(v);
	pcori_w_bytes(w, &be, 2);
}

void pcori_w_u32(pcori_wbuf_t *w, uint32_t v)
{
	uint32_t be = htonl(v);
	pcori_w_bytes(w, &be, 4);
}

void pcori_w_str(pcori_wbuf_t *w, const char *s)
{
	size_t n = strnlen(s, UINT16_MAX + 1u);
	if (n > UINT16_MAX) {
		w->err = true;
		return;
	}
	pcori_w_u16(w, (uint16_t)n);
	pcori_w_bytes(w, s, n);
}

void pcori_frame_begin(pcori_wbuf_t *w, int type)
{
	w->len = 0;
	w->err = false;
	pcori_w_u32(w, 0); /* length, filled by pcori_frame_end */
	pcori_w_u8(w, PCORI_CTL_VERSION);
	pcori_w_u8(w, (uint8_t)type);
	pcori_w_u16(w, 0);
}

bool pcori_frame_end(pcori_wbuf_t *w)
{
	if (w->err || w->len < PCORI_CTL_HDR ||
	    w->len - PCORI_CTL_HDR > PCORI_CTL_MAX)
		return false;
	uint32_t be = htonl((uint32_t)(w->len - PCORI_CTL_HDR));
	memcpy(w->p, &be, 4);
	return true;
}

void pcori_w_member(pcori_wbuf_t *w, const pcori_member_t *m)
{
	pcori_w_u32(w, (uint32_t)m->pid);
	pcori_w_u8(w, (uint8_t)m->state);
	pcori_w_str(w, m->host);
	int n = m->nports < 0 ? 0 : PCORI_MIN(m->nports, PCORI_MAX_PORTS);
	pcori_w_u8(w, (uint8_t)n);
	for (int i = 0; i < n; i++) {
		const pcori_port_info_t *p = &m->ports[i];
		pcori_w_str(w, p->network);
		pcori_w_str(w, p->provider);
		pcori_w_u8(w, p->link_class);
		uint16_t al = PCORI_MIN(p->addrlen, PCORI_ADDR_MAX);
		pcori_w_u16(w, al);
		pcori_w_bytes(w, p->addr, al);
	}
}

/* Unknown (all 0) is sent as it is: the reader cannot tell either. */
void pcori_w_os_proc(pcori_wbuf_t *w, const pcori_os_proc_t *p)
{
	pcori_w_bytes(w, p->boot, sizeof(p->boot));
	pcori_w_u32(w, (uint32_t)(p->pidns >> 32));
	pcori_w_u32(w, (uint32_t)p->pidns);
	pcori_w_u32(w, (uint32_t)(p->netns >> 32));
	pcori_w_u32(w, (uint32_t)p->netns);
	pcori_w_u32(w, (uint32_t)(p->start >> 32));
	pcori_w_u32(w, (uint32_t)p->start);
	pcori_w_u32(w, (uint32_t)p->ospid);
}

void pcori_rbuf_init(pcori_rbuf_t *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->err = false;
}

void pcori_r_bytes(pcori_rbuf_t *r, void *out, size_t n)
{
	if (r->err || r->len - r->off < n) {
		r->err = true;
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->p + r->off, n);
	r->off += n;
}

uint8_t pcori_r_u8(pcori_rbuf_t *r)
{
	uint8_t v;
	pcori_r_bytes(r, &v, 1);
	return v;
}

uint16_t pcori_r_u16(pcori_rbuf_t *r)
{
	uint16_t v;
	pcori_r_bytes(r, &v, 2);
	return ntohs(v);
}

uint32_t pcori_r_u32(pcori_rbuf_t *r)
{
	uint32_t v;
	pcori_r_bytes(r, &v, 4);
	return ntohl(v);
}

void pcori_r_str(pcori_rbuf_t *r, char *out, size_t cap)
{
	uint16_t n = pcori_r_u16(r);
	out[0] = '\0';
	if (r->err || n >= cap || r->len - r->off < n) {
		r->err = true;
		return;
	}
	memcpy(out, r->p + r->off, n);
	out[n] = '\0';
	r->off += n;
	/* An embedded NUL would make two peers read different strings. */
	if (strlen(out) != n)
		r->err = true;
}

void pcori_r_os_proc(pcori_rbuf_t *r, pcori_os_proc_t *p)
{
	pcori_r_bytes(r, p->boot, sizeof(p->boot));
	p->pidns = (uint64_t)pcori_r_u32(r) << 32;
	p->pidns |= pcori_r_u32(r);
	p->netns = (uint64_t)pcori_r_u32(r) << 32;
	p->netns |= pcori_r_u32(r);
	p->start = (uint64_t)pcori_r_u32(r) << 32;
	p->start |= pcori_r_u32(r);
	uint32_t os = pcori_r_u32(r);
	/* Not a process id: named as unknown, not refused. */
	p->ospid = os > INT32_MAX ? 0 : (int32_t)os;
}

void pcori_r_member(pcori_rbuf_t *r, pcori_member_t *m)
{
	memset(m, 0, sizeof(*m));
	uint32_t pid = pcori_r_u32(r);
	m->pid = pid > INT_MAX ? (r->err = true, 0) : (int)pid;
	m->state = pcori_r_u8(r);
	pcori_r_str(r, m->host, sizeof(m->host));
	uint8_t n = pcori_r_u8(r);
	if (n > PCORI_MAX_PORTS) {
		r->err = true;
		return;
	}
	m->nports = n;
	for (int i = 0; i < n && !r->err; i++) {
		pcori_port_info_t *p = &m->ports[i];
		pcori_r_str(r, p->network, sizeof(p->network));
		pcori_r_str(r, p->provider, sizeof(p->provider));
		p->link_class = pcori_r_u8(r);
		p->addrlen = pcori_r_u16(r);
		if (p->addrlen > PCORI_ADDR_MAX) {
			r->err = true;
			return;
		}
		pcori_r_bytes(r, p->addr, p->addrlen);
	}
}
