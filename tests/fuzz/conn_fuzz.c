/*
 * conn_fuzz -- libFuzzer target for a control connection's input side
 * (src/naming/conn.c): framing, the handshake state machine, and frame
 * bodies decoded the way the agent decodes them.
 *
 * The first byte picks the side and state: a server waiting for the
 * client's proof, a client waiting for the challenge or for the server's
 * proof, or a connection already open (as if authenticated, to reach the
 * post-handshake framing).  The rest arrives on the socket, in up to
 * three chunks so frames split across reads are covered.  Whatever
 * arrives, the connection must either stay consistent or ask to be
 * closed with a specific status; never read or write out of bounds.
 */
#include "naming/naming_priv.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

static const uint8_t key[PCORI_KEY_BYTES] = {0x42, 0x17};

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "invariant broken: %s\n", what);
		abort();
	}
}

/* Decode a body the way on_hello and the home requests do. */
static int on_frame(pcori_conn_t *c, int type, pcori_rbuf_t *r, void *ctx)
{
	(void)c;
	int *nframes = ctx;
	(*nframes)++;
	must(type > PCORI_CTL_AUTH_OK && type < PCORI_CTL_TYPE_MAX_,
	     "only post-handshake types reach the owner");
	char s[PCORI_AGENT_ADDR_MAX];
	pcori_os_proc_t proc;
	pcori_member_t m;
	(void)pcori_r_u32(r);
	(void)pcori_r_u8(r);
	pcori_r_str(r, s, sizeof(s));
	if (!r->err)
		must(memchr(s, 0, sizeof(s)) != NULL, "string terminated");
	pcori_r_os_proc(r, &proc);
	if (!r->err)
		must(proc.ospid >= 0, "process id not negative");
	pcori_r_member(r, &m);
	if (!r->err)
		must(m.nports >= 0 && m.nports <= PCORI_MAX_PORTS,
		     "port count in range");
	must(r->off <= r->len, "cursor inside the body");
	return type == PCORI_CTL_BYE ? PCOR_ERR_PEER_LOST : PCOR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	static bool init;
	if (!init) {
		must(pcori_crypto_init() == PCOR_OK, "libsodium");
		init = true;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	int mode = data[0] & 3;
	bool server = mode == 0;
	pcori_conn_t *c = pcori_conn_new(sv[0], server, false, key,
					 1000000000ull);
	must(c != NULL, "connection allocated");
	if (mode == 2)
		c->state = PCORI_CONN_WAIT_OK;
	if (mode == 3)
		c->state = PCORI_CONN_OPEN;
	const uint8_t *p = data + 1;
	size_t left = size - 1;
	/* Bits of the first byte split the input into chunks. */
	size_t cut[3] = {left * ((data[0] >> 2) & 7) / 8,
			 left * ((data[0] >> 5) & 7) / 8, left};
	size_t done = 0;
	int nframes = 0, rc = PCOR_OK;
	for (int k = 0; k < 3 && rc == PCOR_OK; k++) {
		size_t end = cut[k] < done ? done : cut[k];
		if (end > done) {
			ssize_t n = send(sv[1], p + done, end - done,
					 MSG_NOSIGNAL);
			if (n > 0)
				done += (size_t)n;
		}
		bool opened = false;
		rc = pcori_conn_input(c, on_frame, &nframes, &opened);
		must(c->rxlen <= c->rxcap, "buffered bytes within the buffer");
		must(!opened, "no guessed proof opens a connection");
		if (rc == PCOR_OK && c->state != PCORI_CONN_OPEN)
			must(c->rxlen <= PCORI_CTL_HDR + PCORI_CTL_MAX_PREAUTH,
			     "a stranger is held to a few bytes");
	}
	must(rc == PCOR_OK || rc == PCOR_ERR_PROTO || rc == PCOR_ERR_AUTH ||
		     rc == PCOR_ERR_PEER_LOST || rc == PCOR_ERR_NOMEM,
	     "a specific status");
	if (mode != 3)
		must(nframes == 0, "nothing reaches the owner before the "
				   "handshake");
	pcori_conn_free(c);
	close(sv[1]);
	return 0;
}
