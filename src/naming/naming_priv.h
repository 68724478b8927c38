/*
 * naming_priv.h -- private to src/naming (naming.h is what the rest of
 * pcor sees): the control protocol, connections, the agent and its tables.
 *
 * Objects, one file each:
 *   wire.c   frames and their encoding (network byte order, versioned)
 *   auth.c   the job key, HMAC challenge-response, the wire key check
 *   conn.c   one authenticated, length-prefixed TCP connection
 *   boot.c   bootstrap: pcorrun environment, PMIx, or alone
 *   agent.c  the agent thread: listener, peers, membership, requests
 *   home.c   the entries this agent is home for (members, names)
 *   dir.c    the client side: view, cache, hooks, events, init/join/fini
 *   public.c the public pcor_name_*, pcor_spawn, pcor_proc_info calls
 *
 * Threads: the agent thread owns every socket and the home tables.
 * Application threads talk to it through a request queue (dreq) and read
 * the membership view and cache under nm.lock.  User membership callbacks
 * run on a separate event thread, so they may call any pcor function.
 */
#ifndef PCOR_NAMING_PRIV_H
#define PCOR_NAMING_PRIV_H

#include "naming.h"

#include <uthash.h>

/* ------------------------------------------------------------ the wire */

/*
 * Frame: u32 body length | u8 version | u8 type | u16 zero | body.
 * All integers big-endian (network order).  Strings are u16 length +
 * bytes, no NUL.  A frame that breaks any rule closes the connection.
 */
#define PCORI_CTL_VERSION 2
#define PCORI_CTL_HDR 8
#define PCORI_CTL_MAX_PREAUTH 64      /* body bytes before authentication */
#define PCORI_CTL_MAX (1u << 20)      /* body bytes afterwards */
#define PCORI_NONCE_BYTES 32
#define PCORI_MAC_BYTES 32
#define PCORI_AGENT_ADDR_MAX 64       /* "a.b.c.d:port" and then some */
#define PCORI_NAME_MAX (PCOR_NAME_MAX + 1)
#define PCORI_SPAWN_ARGS_MAX 256      /* argv entries of a spawn request */

typedef enum pcori_ctl_type {
	/* authentication (conn.c) */
	PCORI_CTL_CHALLENGE = 1, /* server: nonce */
	PCORI_CTL_AUTH,          /* client: nonce, mac */
	PCORI_CTL_AUTH_OK,       /* server: mac */
	/* agent to agent */
	PCORI_CTL_HELLO,   /* pid, ready, agent address, process, [member] */
	PCORI_CTL_READY,   /* sender is registered and joined */
	PCORI_CTL_BYE,     /* sender leaves normally */
	PCORI_CTL_REG,     /* reqid, member: store at home */
	PCORI_CTL_MLOOKUP, /* reqid, pid */
	PCORI_CTL_PUB,     /* reqid, flags, pid, thid, name */
	PCORI_CTL_UNPUB,   /* reqid, name */
	PCORI_CTL_NLOOKUP, /* reqid, wait ms, name */
	PCORI_CTL_REPLY,   /* reqid, status, payload */
	/* process and launcher (pcorrun) */
	PCORI_CTL_BOOT_HELLO, /* pid, agent address, host */
	PCORI_CTL_BOOT_TABLE, /* n, n x (pid, state, agent address) */
	PCORI_CTL_SPAWN,      /* reqid, host, argc, argv */
	/*
	 * server, before authentication: the client's key was refused; body
	 * the server's key id (pcori_key_check), so a stale key is told from
	 * a wrong launcher.  Then the server closes.
	 */
	PCORI_CTL_REFUSED,
	/* process to launcher: reqid, pid: does pid still run?  REPLY: OK,
	 * PEER_LOST (ended) or NOPEER */
	PCORI_CTL_PROBE,
	/*
	 * client, first, unasked (agents dialing agents): nonce, HMAC(key,
	 * 'T' | nonce | nonce).  Lets a server tell a member from a stranger
	 * as soon as it accepts, before the challenge; see admit.c.
	 */
	PCORI_CTL_TICKET,
	/* agent to agent, when idle: I am alive (no body) */
	PCORI_CTL_PING,
	/*
	 * agent to agent, last: you were silent past the peer timeout and
	 * are declared lost; u32 silence in ms.  The receiver is fenced out.
	 */
	PCORI_CTL_FENCED,
	/*
	 * agent to agent: u32 pid, u32 ms: we declared pid lost after that
	 * much silence and fenced it out; the receiver does the same.
	 */
	PCORI_CTL_SILENT,
	PCORI_CTL_TYPE_MAX_
} pcori_ctl_type_t;

/* PUB flags */
#define PCORI_PUB_REPUBLISH 0x1 /* owner moving its entry: overwrite own */

/* A growable output buffer; err latches on allocation failure. */
typedef struct pcori_wbuf {
	uint8_t *p;
	size_t len, cap;
	bool err;
} pcori_wbuf_t;

/* A bounded input cursor; err latches on any overrun or bad value. */
typedef struct pcori_rbuf {
	const uint8_t *p;
	size_t len, off;
	bool err;
} pcori_rbuf_t;

void pcori_wbuf_free(pcori_wbuf_t *w);
/* Start a frame of the given type (reserves the header). */
void pcori_frame_begin(pcori_wbuf_t *w, int type);
/* Fill in the header's length; false if the frame is unusable. */
bool pcori_frame_end(pcori_wbuf_t *w);
void pcori_w_bytes(pcori_wbuf_t *w, const void *b, size_t n);
void pcori_w_u8(pcori_wbuf_t *w, uint8_t v);
void pcori_w_u16(pcori_wbuf_t *w, uint16_t v);
void pcori_w_u32(pcori_wbuf_t *w, uint32_t v);
void pcori_w_str(pcori_wbuf_t *w, const char *s);
void pcori_w_member(pcori_wbuf_t *w, const pcori_member_t *m);
void pcori_w_os_proc(pcori_wbuf_t *w, const pcori_os_proc_t *p);

void pcori_rbuf_init(pcori_rbuf_t *r, const void *p, size_t len);
uint8_t pcori_r_u8(pcori_rbuf_t *r);
uint16_t pcori_r_u16(pcori_rbuf_t *r);
uint32_t pcori_r_u32(pcori_rbuf_t *r);
void pcori_r_bytes(pcori_rbuf_t *r, void *out, size_t n);
/* Read a string into out[cap] (NUL-terminated); err if it does not fit. */
void pcori_r_str(pcori_rbuf_t *r, char *out, size_t cap);
void pcori_r_member(pcori_rbuf_t *r, pcori_member_t *m);
void pcori_r_os_proc(pcori_rbuf_t *r, pcori_os_proc_t *p);
/* True when the whole body was consumed without error. */
static inline bool pcori_r_done(const pcori_rbuf_t *r)
{
	return !r->err && r->off == r->len;
}

/* ------------------------------------------------------------ the key */

/* A fresh random job key (libsodium's CSPRNG). */
void pcori_key_random(uint8_t key[PCORI_KEY_BYTES]);
/* Hex text <-> key.  Parse returns 0 or -1. */
void pcori_key_to_hex(const uint8_t key[PCORI_KEY_BYTES],
		      char hex[2 * PCORI_KEY_BYTES + 1]);
int pcori_key_from_hex(const char *hex, uint8_t key[PCORI_KEY_BYTES]);
/* HMAC-SHA256(key, label || a || b). */
void pcori_mac(const uint8_t key[PCORI_KEY_BYTES], char label,
	       const uint8_t *a, const uint8_t *b, uint8_t out[PCORI_MAC_BYTES]);
/* First 4 bytes of HMAC(key, "wire"), for the data path's headers. */
uint32_t pcori_key_check(const uint8_t key[PCORI_KEY_BYTES]);
/* Initialise libsodium once; PCOR_OK or PCOR_ERR_SYSTEM. */
int pcori_crypto_init(void);

/* ---------------------------------------------------------- connections */

typedef enum pcori_conn_state {
	PCORI_CONN_CONNECTING = 1, /* client: TCP connect in progress */
	PCORI_CONN_WAIT_CHALLENGE, /* client */
	PCORI_CONN_WAIT_AUTH,      /* server: challenge sent */
	PCORI_CONN_WAIT_OK,        /* client: response sent */
	PCORI_CONN_OPEN,           /* authenticated both ways */
} pcori_conn_state_t;

typedef struct pcori_conn pcori_conn_t;

/* Handles one frame of an open connection; a negative status closes it. */
typedef int (*pcori_frame_fn)(pcori_conn_t *c, int type, pcori_rbuf_t *body,
			      void *ctx);

/*
 * One control connection.  Owned by one thread (the agent's, or the
 * launcher's); nothing here is shared.
 */
struct pcori_conn {
	int fd;
	int state;                   /* pcori_conn_state_t */
	bool server;                 /* accepted, not connected */
	const uint8_t *key;          /* the job key, PCORI_KEY_BYTES */
	uint64_t auth_deadline_ns;   /* must be OPEN by then */
	uint8_t nonce_mine[PCORI_NONCE_BYTES];
	uint8_t nonce_peer[PCORI_NONCE_BYTES];
	uint8_t *rx;                 /* bytes received, not yet framed */
	size_t rxlen, rxcap;
	pcori_wbuf_t tx;             /* bytes to send; txoff already sent */
	size_t txoff;
	/* for the owner */
	int pid;          /* peer's pid once it said HELLO, else -1 */
	bool bye;         /* peer said goodbye */
	bool hello_sent;  /* our HELLO is queued: READY may follow it */
	bool out_armed;   /* the owner polls for writability */
	int kind;         /* the owner's classification */
	int dead;         /* set: close at the next chance, with this status */
	bool refused;     /* client: the server sent REFUSED */
	bool pooled;      /* counted in admit.c's stranger pool */
	bool ticket_ok;   /* server: the client's TICKET proved the key */
	uint64_t last_rx_ns, last_tx_ns; /* liveness (dial.c) */
	pcori_os_proc_t proc; /* its process, as its HELLO named it */
	/* dial.c: silent, but its process seen running (0: not so) */
	uint64_t starved_ns;  /* since when */
	uint64_t win_ns;      /* the window its CPU time is judged over */
	uint64_t win_cpu;     /* its CPU time (ticks) when that began */
	uint64_t recheck_ns;  /* judge its silence again from then */
	uint32_t src_ip;  /* pooled: peer's IPv4 address (network order) */
	pcori_list_t alink, glink; /* pooled: per address, all strangers */
	uint32_t refused_key_id; /* ... with its key id */
	void *owner_data;
	pcori_list_t link;
};

/* Wrap a connected/accepted non-blocking socket.  NULL on no memory. */
pcori_conn_t *pcori_conn_new(int fd, bool server, bool connecting,
			     const uint8_t *key, uint64_t auth_timeout_ns);
void pcori_conn_free(pcori_conn_t *c);
/* Client: queue a TICKET to go first.  PCOR_OK, PCOR_ERR_NOMEM. */
int pcori_conn_ticket(pcori_conn_t *c);
/* Queue a finished frame (copied).  PCOR_OK, PCOR_ERR_NOMEM. */
int pcori_conn_send(pcori_conn_t *c, const pcori_wbuf_t *frame);
/* Write what the socket takes.  PCOR_OK or an error (close it). */
int pcori_conn_flush(pcori_conn_t *c);
static inline bool pcori_conn_wants_write(const pcori_conn_t *c)
{
	return c->state == PCORI_CONN_CONNECTING || c->txoff < c->tx.len;
}
/*
 * The socket is readable (or writable while connecting): advance the
 * handshake, then hand each complete frame to fn.  *opened_p is set when
 * the handshake completes during this call.  A negative return closes the
 * connection: PCOR_ERR_PEER_LOST (orderly EOF or reset), PCOR_ERR_AUTH
 * (wrong key), PCOR_ERR_PROTO (malformed, oversized, wrong version), or
 * whatever fn returned.
 */
int pcori_conn_input(pcori_conn_t *c, pcori_frame_fn fn, void *ctx,
		     bool *opened_p);
/* Finish a non-blocking connect: PCOR_OK once connected, or an error. */
int pcori_conn_connected(pcori_conn_t *c);

/* Socket helpers shared with the launcher. */
int pcori_sock_parse(const char *hostport, void *sin_out);
int pcori_sock_listen(const char *ip, const char *ports, char *addr_out,
		      size_t addr_len);
int pcori_sock_connect(const void *sin); /* non-blocking; fd or -errno */
void pcori_sock_tune(int fd);            /* nodelay, keepalive */
/* "a.b.c.d:port" of the socket's peer, or "?" (for log lines). */
void pcori_sock_peer(int fd, char *out, size_t len);
/* Blocking: drive c until OPEN or deadline. */
int pcori_conn_open_sync(pcori_conn_t *c, uint64_t deadline_ns);
/* Blocking: flush c fully or until deadline. */
int pcori_conn_flush_sync(pcori_conn_t *c, uint64_t deadline_ns);

/* ------------------------------------------------------------ bootstrap */

typedef enum pcori_boot_mode {
	PCORI_BOOT_ALONE = 1,
	PCORI_BOOT_PCORRUN,
	PCORI_BOOT_PMIX,
} pcori_boot_mode_t;

/* One process as the bootstrap table lists it. */
typedef struct pcori_boot_entry {
	int pid;
	int state; /* 0 unknown/joining, or pcori_member_state_t */
	char agent[PCORI_AGENT_ADDR_MAX];
} pcori_boot_entry_t;

/* What bootstrap leaves for the agent. */
typedef struct pcori_boot_out {
	int mode;                   /* pcori_boot_mode_t */
	int listen_fd;
	char agent[PCORI_AGENT_ADDR_MAX]; /* own listener */
	pcori_conn_t *seed;         /* pcorrun connection (OPEN), or NULL */
	pcori_boot_entry_t *table;  /* who to connect to */
	int ntable;
} pcori_boot_out_t;

int pcori_boot_run(const pcori_config_t *cfg, pcori_boot_t *boot,
		   pcori_boot_out_t *out);
void pcori_boot_fini(int mode);
void pcori_host_identity(char host[PCORI_HOST_MAX]);

/* -------------------------------------------------------- the directory */

/* View states: 0 while a process is joining, then pcori_member_state_t. */
#define PCORI_VIEW_JOINING 0

/* What this process knows of one pid.  Guarded by nm.lock. */
typedef struct pcori_view {
	int pid;
	int state;       /* PCORI_VIEW_JOINING or pcori_member_state_t */
	char agent[PCORI_AGENT_ADDR_MAX];
	bool cached;     /* member holds a copy of its directory entry */
	pcori_member_t member;
	UT_hash_handle hh;
	/* agent thread only */
	pcori_conn_t *conn;   /* open control connection, after HELLO */
	pcori_wbuf_t backlog; /* frames for it while not connected */
	bool dialed;          /* we connect to it (not it to us) */
	/* dial.c: suspicion after failed connects */
	uint64_t suspect_ns;  /* first failure of this streak; 0 none */
	uint64_t redial_ns;   /* next attempt; 0 none scheduled */
	int nfail;            /* failed attempts in this streak */
	bool probing;         /* asked the launcher or a witness */
	uint64_t probe_ns;    /* when; a witness may never answer */
} pcori_view_t;

/* Application requests handed to the agent. */
typedef enum pcori_dreq_op {
	PCORI_OP_JOIN = 1,
	PCORI_OP_MLOOKUP,
	PCORI_OP_PUB,
	PCORI_OP_UNPUB,
	PCORI_OP_NLOOKUP,
	PCORI_OP_SPAWN,
} pcori_dreq_op_t;

/*
 * One request.  Lives on the caller's stack: the agent always completes
 * it (before its deadline at the latest), so the caller waits without a
 * timeout and the pointer never dangles.
 */
typedef struct pcori_dreq {
	pcori_list_t link;       /* queue, then the agent's pending list */
	int op;
	_Atomic uint32_t done;   /* wait word: PCORI_WORD_PENDING/REQ_DONE */
	int status;
	/* arguments */
	int pid, thid;
	char name[PCORI_NAME_MAX];
	int64_t wait_ms;         /* NLOOKUP: <0 forever */
	const pcori_member_t *self; /* JOIN */
	const char *host;        /* SPAWN */
	char *const *argv;       /* SPAWN */
	/* results */
	int out_pid, out_thid;
	pcori_member_t *out_member; /* MLOOKUP */
	/* agent thread only */
	uint32_t reqid;
	int target;              /* pid it was sent to, -1 none, -2 seed */
	int phase;
	int attempts;
	uint64_t deadline_ns;    /* 0: none */
	UT_hash_handle hh;       /* pending, by reqid */
} pcori_dreq_t;

/* A name this agent is home for. */
typedef struct pcori_hname {
	char name[PCORI_NAME_MAX];
	int pid, thid;
	int owner; /* publishing process */
	UT_hash_handle hh;
} pcori_hname_t;

/* A member entry this agent is home for. */
typedef struct pcori_hmember {
	int pid;
	pcori_member_t m;
	UT_hash_handle hh;
} pcori_hmember_t;

/* A lookup waiting at home for a name to be published. */
typedef struct pcori_hwait {
	pcori_list_t link;
	int src;
	uint32_t reqid;
	uint64_t deadline_ns;
	char name[PCORI_NAME_MAX];
} pcori_hwait_t;

/* A name this process published (it re-publishes on membership change). */
typedef struct pcori_myname {
	char name[PCORI_NAME_MAX];
	int pid, thid;
	int home; /* where it was last sent */
	UT_hash_handle hh;
} pcori_myname_t;

#define PCORI_MAX_HOOKS 8

typedef struct pcori_evt {
	pcori_list_t link;
	int pid, ev;
} pcori_evt_t;

/* The naming module's state: one per process. */
typedef struct pcori_nm {
	pcori_boot_t boot;
	int mode;
	int64_t join_timeout_ms, req_timeout_ms, auth_timeout_ms;
	int64_t peer_timeout_ms, fault_connect_pct, fault_connect_to;
	int unauth_max, unauth_per_addr;
	char agent[PCORI_AGENT_ADDR_MAX];
	int listen_fd, efd, epfd;
	pthread_t thread;
	bool thread_started;
	_Atomic bool stop;

	/*
	 * Guards view (the map pid -> state/agent/cached entry), self and
	 * hooks.  Never held while calling out or blocking; taken after
	 * qlock never (they do not nest).
	 */
	pcori_lock_t lock;
	pcori_view_t *view;
	pcori_member_t self;
	bool joined;
	struct {
		pcori_member_hook_fn fn;
		void *ctx;
	} hooks[PCORI_MAX_HOOKS];
	int nhooks;

	/* Guards reqq: requests handed to the agent. */
	pcori_lock_t qlock;
	pcori_list_t reqq;

	/* Agent thread only. */
	pcori_list_t conns;     /* every connection but the seed */
	pcori_conn_t *seed;
	pcori_dreq_t *pending;  /* by reqid */
	pcori_list_t waiting;   /* JOIN and SPAWN waiting on membership */
	uint32_t next_reqid;
	pcori_hmember_t *hmembers;
	pcori_hname_t *hnames;
	pcori_list_t hwaits;
	pcori_myname_t *mynames;
	int self_home;          /* where the own entry was registered */
	bool registered;        /* own entry acknowledged by its home */
	bool ready_sent;

	/* Guards the user callback and the event queue. */
	pthread_mutex_t evlock;
	pthread_cond_t evcond;
	pcor_member_fn user_fn;
	void *user_ctx;
	pcori_list_t evq;
	pthread_t evthread;
	bool evthread_started, evstop;

	_Atomic bool fenced; /* a peer declared us lost (dial.c) */
	pcori_os_proc_t self_proc; /* ours, for our HELLO */
	/* statistics (any thread) */
	_Atomic uint64_t n_auth_fail, n_proto_fail, n_accepted;
} pcori_nm_t;

extern pcori_nm_t pcori_nm;

/* agent.c */
/* Request ids of the agent's own registrations carry this bit. */
#define PCORI_REQID_REG 0x80000000u
/* Request ids of launcher probes: this bit, plus the pid asked about. */
#define PCORI_REQID_PROBE 0x40000000u
int pcori_agent_start(pcori_boot_out_t *bo);
void pcori_agent_add_conn(pcori_conn_t *c, bool want_out);
void pcori_agent_push(pcori_conn_t *c, const pcori_wbuf_t *frame);
void pcori_agent_member_gone(pcori_view_t *e, bool bye);
pcori_view_t *pcori_agent_view(int pid);
bool pcori_agent_view_live(const pcori_view_t *e);
bool pcori_agent_is_peer(const pcori_conn_t *c);

/* req.c */
void pcori_dreq_complete(pcori_dreq_t *r, int status);
/* The agent r was sent to went away: try the next home or give up. */
void pcori_dreq_retarget(pcori_dreq_t *r);
/* JOIN and SPAWN waiters: complete those whose condition now holds. */
void pcori_dreq_check_waiting(void);
/* Membership changed: re-send the own entry and names to their homes. */
void pcori_dreq_rehome(void);
/* A REPLY (reqid, status, rest of the body) arrived. */
void pcori_dreq_reply_in(uint32_t reqid, int status, pcori_rbuf_t *r);
/* An application request from the queue: start it. */
void pcori_dreq_start(pcori_dreq_t *r);

/* dial.c */
void pcori_dial(pcori_view_t *e);
/* A dial failed (or closed before HELLO): suspect, retry later. */
void pcori_dial_failed(pcori_view_t *e, int rc, uint32_t refused_key_id);
/* The peer said HELLO: suspicion cleared. */
void pcori_dial_ok(pcori_view_t *e);
void pcori_dial_probe_reply(int pid, int status);
/* A member asks whether we still hear a process (we are its witness). */
int pcori_dial_probe_request(pcori_conn_t *c, pcori_rbuf_t *r);
/* Redial and confirm what is due; returns the next time to call. */
uint64_t pcori_dial_expire(uint64_t now);
/*
 * Heartbeats: ping idle peers, and declare lost (fencing it) a peer that
 * sent nothing for the peer timeout.  Returns the next time to call.
 */
uint64_t pcori_live_tick(uint64_t now);
/* A FENCED frame arrived from pid: we were declared lost. */
int pcori_live_fenced(int pid, pcori_rbuf_t *r);
/* A SILENT frame arrived from member `from`: follow its verdict. */
int pcori_live_silent(int from, pcori_rbuf_t *r);
/* TCP_USER_TIMEOUT for control sockets made from now on (0: leave). */
void pcori_sock_set_user_timeout(int64_t ms);
void pcori_agent_stop(void);
/* Hand a request to the agent and wait for it.  Returns its status. */
int pcori_agent_call(pcori_dreq_t *r);
/* Send a request frame to pid (or to this agent's home code). */
void pcori_agent_to(int pid, pcori_wbuf_t *frame);
/* Deliver a reply to (src, reqid). */
void pcori_agent_reply(int src, uint32_t reqid, int status,
		       pcori_wbuf_t *payload);
/* Living members that may be homes (JOINING or ALIVE). */
int pcori_agent_home_of(uint64_t key_hash);

/* home.c */
/* A request frame for this agent as home, from process src. */
int pcori_home_request(int src, int type, pcori_rbuf_t *body);
/* Membership changed: answer waiters "retry", drop what pid owned. */
void pcori_home_member_gone(int pid);
void pcori_home_retry_waiters(void);
/* Waiters past their deadline. Returns the nearest remaining deadline. */
uint64_t pcori_home_expire(uint64_t now);
void pcori_home_fini(void);

/* admit.c: strangers (connections not yet authenticated) */
enum {
	PCORI_REFUSE_AUTH,    /* wrong key */
	PCORI_REFUSE_PROTO,   /* malformed or oversized */
	PCORI_REFUSE_TIMEOUT, /* did not authenticate in time */
	PCORI_REFUSE_SHED,    /* closed to make room for a newcomer */
	PCORI_REFUSE_NOFD,    /* accepted and dropped: out of descriptors */
	PCORI_REFUSE_NREASONS_
};
void pcori_admit_init(void);
void pcori_admit_fini(void);
/* Count a newly accepted stranger in; may shed older ones (sets dead). */
int pcori_admit_add(pcori_conn_t *c);
/* c authenticated or closed: out of the pool (idempotent). */
void pcori_admit_leave(pcori_conn_t *c);
/* Count (and, rate-limited, log) one refusal. */
void pcori_admit_refused(int why, const char *from);
/* Log what was held back; returns when to call again, or UINT64_MAX. */
uint64_t pcori_admit_tick(uint64_t now);
/* accept() failed with err: drop the connection if out of descriptors. */
void pcori_admit_accept_failed(int listen_fd, int err);
int pcori_admit_count(void);
/* Refusals so far, by reason (any thread). */
void pcori_admit_stats(uint64_t refused[PCORI_REFUSE_NREASONS_]);

/* dir.c */
uint64_t pcori_hash_str(const char *s);
uint64_t pcori_hash_pid(int pid);
/* Set a view entry's state (nm.lock held) and return the event, or 0. */
void pcori_dir_event(int pid, int ev);
void pcori_dir_grow_nprocs(int pid);
/* Statistics for tests and pcor_info. */
void pcori_naming_stats(uint64_t *auth_fail, uint64_t *proto_fail,
			uint64_t *accepted);
/* Drop every cached entry (benchmarks: measure the uncached path). */
void pcori_dir_cache_flush(void);
/* View state and agent address of pid; PCOR_ERR_NOPEER if unknown. */
int pcori_dir_view(int pid, int *state_p, char *agent, size_t len);
/* Set (fn non-NULL) or clear the user's membership callback. */
int pcori_dir_callback_set(pcor_member_fn fn, void *ctx);

#endif /* PCOR_NAMING_PRIV_H */
