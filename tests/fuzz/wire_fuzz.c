/*
 * wire_fuzz -- libFuzzer target for what a peer controls: the wire header
 * decoder, the rendezvous body decoder and fragment reassembly.
 *
 * Input layout: the whole input is offered to the decoder as a received
 * message; then, read as a script, it drives a reassembly state machine
 * (first two bytes: fragment count; then pairs: fragment index).  Every
 * step's invariants are checked; a violation aborts (a finding).
 */
#include "frag/wire.h"
#include "frag/frag.h"

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "invariant broken: %s\n", what);
		abort();
	}
}

static void decode(const uint8_t *data, size_t size)
{
	pcori_wire_limits_t lim = {.key_check = 0x5a5a5a5a,
				   .nprocs = 64,
				   .max_threads = 4096,
				   .frag_size = 65536};
	pcori_wire_hdr_t h;
	pcori_wire_err_t e = pcori_wire_decode(data, size, &lim, &h);
	must((unsigned)e < PCORI_WE_COUNT_, "verdict in range");
	must(pcori_wire_err_str(e) != NULL, "verdict named");
	if (e != PCORI_WE_OK)
		return;
	/* What the receiver relies on after a successful decode. */
	must(h.version == PCORI_WIRE_VERSION && h.key_check == lim.key_check,
	     "version and key");
	must(h.type > 0 && h.type < PCORI_W_TYPE_MAX_, "type");
	must(h.src_pid >= 0 && h.src_pid < lim.nprocs && h.dst_pid >= 0 &&
		     h.dst_pid < lim.nprocs,
	     "pids");
	must(h.src_thid >= 0 && h.src_thid < lim.max_threads &&
		     h.dst_thid >= 0 && h.dst_thid < lim.max_threads,
	     "thids");
	must(h.frag_len == size - PCORI_WIRE_HDR_SIZE, "payload length");
	if (h.type == PCORI_W_DATA) {
		must(h.frag_idx < h.frag_count, "fragment index");
		size_t off, len;
		pcori_frag_bounds(h.total_size, lim.frag_size, h.frag_idx, &off,
				  &len);
		must(len == h.frag_len && off + len <= h.total_size,
		     "fragment inside the message");
	}
	if (h.type == PCORI_W_RTS) {
		pcori_wire_rts_t r;
		pcori_wire_rts_decode(data + PCORI_WIRE_HDR_SIZE, &r);
		uint8_t again[PCORI_WIRE_RTS_SIZE];
		pcori_wire_rts_encode(&r, again);
		must(!memcmp(again, data + PCORI_WIRE_HDR_SIZE, 20),
		     "rts round trip");
	}
	/* Re-encoding a valid header gives back the same bytes. */
	uint8_t again[PCORI_WIRE_HDR_SIZE];
	pcori_wire_encode(&h, again);
	must(!memcmp(again, data, PCORI_WIRE_HDR_SIZE), "header round trip");
}

static void reassemble(const uint8_t *data, size_t size)
{
	if (size < 2)
		return;
	uint32_t n = 1 + ((uint32_t)data[0] | (uint32_t)data[1] << 8) % 2000;
	pcori_reasm_t r;
	pcori_reasm_init(&r, n);
	uint8_t *seen = calloc(n, 1);
	if (!seen)
		return;
	for (size_t i = 2; i + 1 < size; i += 2) {
		uint32_t idx = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8;
		uint32_t base = r.base, got = r.received;
		pcori_frag_verdict_t v = pcori_reasm_accept(&r, idx);
		switch (v) {
		case PCORI_FRAG_NEW:
			must(idx < n && !seen[idx], "new is new");
			must(idx >= base && idx - base < PCORI_FRAG_WINDOW,
			     "new is in the window");
			seen[idx] = 1;
			must(r.received == got + 1, "counted once");
			break;
		case PCORI_FRAG_DUP:
			must(idx < n && (seen[idx] || idx < base), "dup seen");
			must(r.received == got, "dup not counted");
			break;
		case PCORI_FRAG_AHEAD:
			must(idx < n && idx - base >= PCORI_FRAG_WINDOW,
			     "ahead is past the window");
			break;
		case PCORI_FRAG_BAD:
			must(idx >= n, "bad is outside");
			break;
		}
		must(r.received <= n, "never more than all");
		if (pcori_reasm_window_done(&r) && !pcori_reasm_complete(&r))
			pcori_reasm_advance(&r);
	}
	uint32_t count = 0;
	for (uint32_t i = 0; i < n; i++)
		count += seen[i];
	must(count == r.received, "bitmap agrees with what was accepted");
	must(pcori_reasm_complete(&r) == (count == n), "complete iff all");
	free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode(data, size);
	reassemble(data, size);
	return 0;
}
