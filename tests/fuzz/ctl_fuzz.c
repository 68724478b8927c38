/*
 * ctl_fuzz -- libFuzzer target for the directory's control protocol
 * readers: bounded cursors, strings and member entries decoded from bytes
 * a peer (or an attacker on the TCP port) sends.
 *
 * The first byte picks a sequence of reads; the rest is the body.  A read
 * past the end or a bad value must latch the error and never touch
 * memory outside the body or the output.
 */
#include "naming/naming_priv.h"

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "invariant broken: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t script = data[0];
	pcori_rbuf_t r;
	pcori_rbuf_init(&r, data + 1, size - 1);
	for (int step = 0; step < 16 && !r.err; step++) {
		size_t before = r.off;
		switch ((script >> (step % 4 * 2)) & 3) {
		case 0: {
			pcori_member_t m;
			pcori_r_member(&r, &m);
			if (!r.err) {
				must(m.nports >= 0 && m.nports <= PCORI_MAX_PORTS,
				     "port count in range");
				must(memchr(m.host, 0, sizeof(m.host)) != NULL,
				     "host terminated");
				for (int i = 0; i < m.nports; i++)
					must(m.ports[i].addrlen <=
						     sizeof(m.ports[i].addr),
					     "address length in range");
			}
			break;
		}
		case 1: {
			char s[64];
			pcori_r_str(&r, s, sizeof(s));
			if (!r.err)
				must(memchr(s, 0, sizeof(s)) != NULL,
				     "string terminated");
			break;
		}
		case 2:
			(void)pcori_r_u32(&r);
			break;
		case 3: {
			uint8_t b[40];
			pcori_r_bytes(&r, b, sizeof(b));
			break;
		}
		}
		must(r.off <= r.len, "cursor inside the body");
		must(r.err || r.off >= before, "cursor moves forward");
	}
	return 0;
}
