/*
 * reasm.c -- segmentation and reassembly with 32-bit fragment bitmaps.
 *
 * A message of n fragments is received window by window; the bitmap has
 * one bit per fragment of the current window (as in pCoR, 32 fragments of
 * 64 KiB make a 2 MiB window).  Duplicates are recognised by their bit,
 * fragments of windows already done by their index, and fragments of
 * later windows are refused so the sender resends them.
 */
#include "frag.h"

uint32_t pcori_frag_count(size_t size, size_t frag_size)
{
	if (size == 0)
		return 1;
	return (uint32_t)((size + frag_size - 1) / frag_size);
}

void pcori_frag_bounds(size_t size, size_t frag_size, uint32_t idx,
		       size_t *off_p, size_t *len_p)
{
	size_t off = (size_t)idx * frag_size;
	*off_p = off;
	*len_p = off >= size ? 0 : PCORI_MIN(frag_size, size - off);
}

void pcori_reasm_init(pcori_reasm_t *r, uint32_t nfrags)
{
	r->nfrags = nfrags;
	r->base = 0;
	r->bitmap = 0;
	r->received = 0;
}

uint32_t pcori_reasm_window_len(const pcori_reasm_t *r)
{
	uint32_t left = r->nfrags - r->base;
	return left < PCORI_FRAG_WINDOW ? left : PCORI_FRAG_WINDOW;
}

static uint32_t window_mask(const pcori_reasm_t *r)
{
	uint32_t n = pcori_reasm_window_len(r);
	return n >= 32 ? 0xffffffffu : ((1u << n) - 1);
}

pcori_frag_verdict_t pcori_reasm_accept(pcori_reasm_t *r, uint32_t idx)
{
	if (idx >= r->nfrags)
		return PCORI_FRAG_BAD;
	if (idx < r->base)
		return PCORI_FRAG_DUP;
	if (idx - r->base >= PCORI_FRAG_WINDOW)
		return PCORI_FRAG_AHEAD;
	uint32_t bit = 1u << (idx - r->base);
	if (r->bitmap & bit)
		return PCORI_FRAG_DUP;
	r->bitmap |= bit;
	r->received++;
	return PCORI_FRAG_NEW;
}

uint32_t pcori_reasm_missing(const pcori_reasm_t *r)
{
	return ~r->bitmap & window_mask(r);
}

bool pcori_reasm_window_done(const pcori_reasm_t *r)
{
	return r->base < r->nfrags && pcori_reasm_missing(r) == 0;
}

void pcori_reasm_advance(pcori_reasm_t *r)
{
	PCORI_ASSERT(pcori_reasm_window_done(r));
	r->base += pcori_reasm_window_len(r);
	r->bitmap = 0;
}
