/*
 * naming.h -- private interface of src/naming: bootstrap, the directory
 * service (agents, client cache, published names) and membership events.
 *
 * The contract with the rest of pcor:
 *  1. pcor_init calls pcori_naming_init first: it learns this process's
 *     pid, the job size and key (pcorrun environment, PMIx, or alone) and
 *     starts this process's directory agent.
 *  2. The dispatch layer then opens its ports and describes them in a
 *     pcori_member_t.
 *  3. pcori_naming_join registers that entry with its home agent and
 *     returns once every initial member has registered, so any pid below
 *     the job size resolves as soon as pcor_init returns.
 *  4. Lookups (pcori_dir_lookup) are served from a local cache, filled
 *     from the home agent on a miss; membership events invalidate it.
 *  5. Internal subscribers (route table, dispatch) learn of start-up,
 *     exit and failure events through pcori_dir_hook_add.
 */
#ifndef PCOR_NAMING_H
#define PCOR_NAMING_H

#include "../core/core.h"

#define PCORI_ADDR_MAX 256  /* bytes of one fabric address */
#define PCORI_MAX_PORTS 8   /* ports per process */
#define PCORI_NET_MAX 96    /* network identity string */
#define PCORI_HOST_MAX 96   /* host identity string */
#define PCORI_KEY_BYTES 32  /* job key */

/* Link classes, cheapest first: the routing weights' order. */
typedef enum pcori_link_class {
	PCORI_LINK_SELF = 0, /* same process */
	PCORI_LINK_SHM,      /* shared memory on one host */
	PCORI_LINK_RDMA,     /* verbs, efa, psm3, cxi ... */
	PCORI_LINK_TCP,
	PCORI_LINK_UDP,
} pcori_link_class_t;

/* One port of a process, as the directory stores it. */
typedef struct pcori_port_info {
	/*
	 * Two ports can talk when their networks are equal: e.g.
	 * "tcp;ofi_rxm/10.1.0.0/24" or "pcor-shm/<host identity>".
	 */
	char network[PCORI_NET_MAX];
	char provider[32]; /* "tcp;ofi_rxm", "shm", "udp;ofi_rxd", "pcor-shm" */
	uint8_t link_class; /* pcori_link_class_t */
	uint16_t addrlen;
	uint8_t addr[PCORI_ADDR_MAX]; /* fabric address (fi_getname) */
} pcori_port_info_t;

typedef enum pcori_member_state {
	PCORI_MEMBER_ALIVE = 1,
	PCORI_MEMBER_EXITED, /* left through pcor_finalize */
	PCORI_MEMBER_FAILED, /* control connection lost without goodbye */
} pcori_member_state_t;

/* What the directory knows of one process. */
typedef struct pcori_member {
	int pid;
	int state; /* pcori_member_state_t */
	/*
	 * Host identity: processes with equal strings share memory and a
	 * kernel network stack.  Includes the network namespace, so test
	 * "hosts" made of namespaces on one machine are distinct hosts.
	 */
	char host[PCORI_HOST_MAX];
	int nports;
	pcori_port_info_t ports[PCORI_MAX_PORTS];
} pcori_member_t;

/* Facts learned at bootstrap. */
typedef struct pcori_boot {
	int pid;
	int nprocs;     /* initial job size */
	bool spawned;   /* started by pcor_spawn into a running job */
	/*
	 * The whole job runs on this host as far as bootstrap can tell (the
	 * launcher was reached over loopback, PMIx says all ranks are local,
	 * or the process runs alone): data ports can stay host-local.
	 */
	bool one_host;
	uint8_t key[PCORI_KEY_BYTES];
	uint32_t key_check; /* derived from key; carried in wire headers */
	char host[PCORI_HOST_MAX];
} pcori_boot_t;

/* Bootstrap and start this process's agent.  Fills *boot_p. */
int pcori_naming_init(const pcori_config_t *cfg, pcori_boot_t *boot_p);
/* Register self (ports filled in) and wait for the initial membership. */
int pcori_naming_join(const pcori_member_t *self);
/* Announce a normal exit and stop the agent. */
void pcori_naming_fini(void);

/*
 * Resolve a pid.  PCOR_OK; PCOR_ERR_NOPEER (never a member);
 * PCOR_ERR_PEER_LOST (exited or failed; *m_p still filled).
 * Thread-safe; cached.
 */
int pcori_dir_lookup(int pid, pcori_member_t *m_p);

typedef enum pcori_member_event {
	PCORI_EV_STARTUP = 1,
	PCORI_EV_EXIT,
	PCORI_EV_FAILURE,
} pcori_member_event_t;

/*
 * Subscribe to membership events.  fn runs on the agent's thread, with no
 * pcor lock held; it must not block for long.
 */
typedef void (*pcori_member_hook_fn)(int pid, pcori_member_event_t ev,
				     void *ctx);
int pcori_dir_hook_add(pcori_member_hook_fn fn, void *ctx);

#endif /* PCOR_NAMING_H */
