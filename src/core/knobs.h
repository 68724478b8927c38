/*
 * knobs.h -- the PCOR_* environment variables and the configuration
 * they fill (knobs.c).  Part of core.h, which includes it.
 */
#ifndef PCOR_CORE_KNOBS_H
#define PCOR_CORE_KNOBS_H

#include "base.h"

/* ---------------------------------------------------------------- knobs */

/*
 * Every environment variable pcor reads, declared once:
 * X(NAME, field, type, default, min, max, help).  The variable is
 * PCOR_<NAME>; numeric knobs are range-checked at pcor_init; SIZE knobs
 * take k/m/g suffixes (powers of 1024).  tools/pcor_info prints them.
 */
#define PCORI_KNOBS(X)                                                         \
	X(ACK_DELAY_NS, ack_delay_ns, INT, "20000", 0, 1000000000,             \
	  "how long a receiver may hold back an acknowledgement hoping to "    \
	  "piggyback it on a message going the other way (ns)")                \
	X(AFFINITY, affinity, STRING, "off", 0, 0,                             \
	  "pin each process's main thread, its dispatchers and the threads "   \
	  "it starts to one CPU: off, auto (the pid-th CPU allowed) or a "     \
	  "list of CPUs picked by pid, e.g. 0,1")                              \
	X(AGENT_ADDR, agent_addr, STRING, "", 0, 0,                            \
	  "launcher agents to bootstrap from, ip:port[,ip:port...] (set by "   \
	  "pcorrun)")                                                          \
	X(AGENT_IF, agent_if, STRING, "", 0, 0,                                \
	  "IPv4 address the directory agent listens on; empty: loopback when " \
	  "the job is on one host, else the address that reached the "         \
	  "launcher")                                                          \
	X(AGENT_PORTS, agent_ports, STRING, "0", 0, 0,                         \
	  "TCP port or range lo-hi for the directory agent; 0: any")           \
	X(AUTH_TIMEOUT_MS, auth_timeout_ms, INT, "2000", 10, 600000,           \
	  "time a control connection has to authenticate and say hello")       \
	X(BACKPRESSURE_MS, backpressure_ms, INT, "1000", 0, 3600000,           \
	  "how long a send waits for room in a full receiver pool, or in "    \
	  "this process's send budget (PCOR_SEND_BYTES), before returning "    \
	  "PCOR_ERR_AGAIN")                                                    \
	X(BLOCK_POLL_NS, block_poll_ns, INT, "50000", 1000, 999999999,         \
	  "a blocked dispatcher of a port without a wait descriptor (shm, "    \
	  "udp) polls this often (ns)")                                        \
	X(DISPATCH, dispatch, STRING, "adaptive", 0, 0,                        \
	  "dispatcher mode of every port: poll, block or adaptive")            \
	X(DISPATCH_SPIN_NS, dispatch_spin_ns, INT, "200000", 0, 10000000000LL, \
	  "adaptive dispatchers (and poll ones while a thread drives another " \
	  "port) spin this long after the last event before they block (ns)")  \
	X(DMA_RESERVE, dma_reserve, SIZE, "64g", 64 << 20, (1LL << 46),        \
	  "virtual address space reserved for DMA memory (only touched pages " \
	  "use memory)")                                                       \
	X(DROP_EVERY, drop_every, INT, "0", 0, 1000000000,                     \
	  "testing: every Nth frame arriving at a port is dropped, as a "      \
	  "lossy fabric would (0: none)")                                      \
	X(EAGER_MAX, eager_max, SIZE, "64k", 0, 2 << 20,                       \
	  "messages up to this size are sent eagerly; larger ones by "         \
	  "rendezvous (at most 32 fragments)")                                 \
	X(FAULT_CONNECT_PCT, fault_connect_pct, INT, "0", 0, 100,              \
	  "testing: this percentage of the directory agent's connection "     \
	  "attempts to other agents fail on purpose (fault injection)")        \
	X(FAULT_CONNECT_TO, fault_connect_to, INT, "-1", -1, INT32_MAX,       \
	  "testing: every attempt of the directory agent to connect to this " \
	  "process fails on purpose (-1: none)")                              \
	X(FRAG_SIZE, frag_size, SIZE, "64k", 1024, 16 << 20,                   \
	  "largest fragment a port sends; messages are cut into fragments "    \
	  "of this size")                                                      \
	X(IFACES, ifaces, STRING, "", 0, 0,                                    \
	  "comma-separated fabric domains (network interfaces for tcp/udp) "   \
	  "to open data ports on; empty: all")                                 \
	X(JOB_KEY, job_key, STRING, "", 0, 0,                                  \
	  "job key, 64 hex digits (set by pcorrun; keep it secret)")           \
	X(JOB_PID, job_pid, INT, "-1", -1, INT_MAX - 1,                        \
	  "this process's id (set by pcorrun)")                                \
	X(JOB_SIZE, job_size, INT, "0", 0, INT_MAX - 1,                        \
	  "number of processes started together (set by pcorrun; 0: not "      \
	  "started by pcorrun)")                                               \
	X(JOIN_TIMEOUT_MS, join_timeout_ms, INT, "60000", 100, 86400000,       \
	  "how long pcor_init waits for the other processes, and pcor_spawn "  \
	  "for the new one")                                                   \
	X(LINGER_MS, linger_ms, INT, "10000", 0, 3600000,                      \
	  "how long pcor_finalize waits for live peers to take what was sent " \
	  "to them (acks, rendezvous data)")                                   \
	X(LOG_FILE, log_file, STRING, "", 0, 0,                                \
	  "append log lines to this file instead of stderr")                   \
	X(LOG_LEVEL, log_level, STRING, "warn", 0, 0,                          \
	  "least severe level logged: error, warn, info, debug, trace")        \
	X(LOG_SUBSYS, log_subsys, STRING, "all", 0, 0,                         \
	  "comma-separated subsystems to log: core, frag, dispatch, naming, "  \
	  "route, mpi, app, or all")                                           \
	X(MAX_HANDLES, max_handles, INT, "1048576", 1024, 1048576,             \
	  "handles (sends and receives in progress) per process")              \
	X(MAX_THREADS, max_threads, INT, "4096", 1, 65536,                     \
	  "thread ids per process (ids are 0 .. MAX_THREADS-1)")               \
	X(MCB_POOL, mcb_pool, INT, "65536", 16, 16777216,                      \
	  "message control blocks per process: bounds the unexpected "         \
	  "messages held at once (fast messages, which cannot be refused, "    \
	  "may add up to 256 per sending thread)")                             \
	X(MEMBARRIER, membarrier, INT, "1", 0, 1,                              \
	  "1: where the kernel allows and waiters spin (PCOR_SPIN_NS > 0, "    \
	  "dispatch not block), threads on the message path fence only for "  \
	  "the compiler and a thread about to sleep calls membarrier(2), "    \
	  "until sleeps stay frequent (1000/s for 5 s: real fences from "    \
	  "then on); 0: real fences on both sides (read at load)")            \
	X(MPI_ALLREDUCE_LARGE, mpi_allreduce_large, SIZE, "64k", 0,            \
	  (1LL << 46),                                                         \
	  "MPI shim: allreduces of at least this many bytes with a "           \
	  "predefined operation use reduce-scatter + allgather "               \
	  "(Rabenseifner) instead of recursive doubling")                      \
	X(MPI_BCAST_LARGE, mpi_bcast_large, SIZE, "8m", 0, (1LL << 46),        \
	  "MPI shim: broadcasts of at least this many bytes among 3 or more "  \
	  "ranks use scatter + allgather instead of a binomial tree")          \
	X(NAMING_TIMEOUT_MS, naming_timeout_ms, INT, "10000", 10, 3600000,     \
	  "how long a directory request waits for another agent's answer")     \
	X(PEER_TIMEOUT_MS, peer_timeout_ms, INT, "1500", 100, 3600000,         \
	  "a process that cannot be reached or is silent for this long is "   \
	  "declared lost (one on this host that runs and uses CPU waits, "    \
	  "16 times this at most)")                                           \
	X(PMIX, pmix, STRING, "auto", 0, 0,                                    \
	  "bootstrap through PMIx: auto (when a PMIx server started us), on, " \
	  "off")                                                               \
	X(PROVIDERS, providers, STRING, "pcor-shm,net", 0, 0,                  \
	  "comma-separated port kinds to open, in order of preference: "      \
	  "pcor-shm (pcor's shared memory, same host) or libfabric providers " \
	  "(net, shm, tcp;ofi_rxm, verbs;ofi_rxm...)")                         \
	X(RNDV, rndv, STRING, "read", 0, 0,                                    \
	  "rendezvous data movement: read (remote read where the provider "    \
	  "can) or stream (windows of fragments)")                             \
	X(RTO_MS, rto_ms, INT, "1000", 1, 600000,                               \
	  "a message unacknowledged this long is sent again (doubling up to "  \
	  "25x); guards against fabrics that lose or corrupt a message")       \
	X(RXD_WINDOW, rxd_window, INT, "32", 0, 65536,                        \
	  "udp;ofi_rxd: packets in flight per peer (sets "                    \
	  "FI_OFI_RXD_MAX_UNACKED unless that is set); rxd's own 128 stalls "  \
	  "under two-way load; 0: leave rxd's default")                        \
	X(SEND_BYTES, send_bytes, SIZE, "64m", 0, (1LL << 46),                 \
	  "bytes held at once per process for messages to other processes "   \
	  "until they are acknowledged: copies plus a record of 412 bytes "    \
	  "per small message, 4.5 KiB per rendezvous (a sendDMA counts its "   \
	  "record only; one copy larger than the budget may go past it); "     \
	  "past it a send waits PCOR_BACKPRESSURE_MS, then returns "           \
	  "PCOR_ERR_AGAIN")                                                    \
	X(SHM_CELLS, shm_cells, INT, "256", 1, 65536,                          \
	  "pcor-shm: cells in each process's send pool (medium messages)")     \
	X(SHM_CELL_SIZE, shm_cell_size, SIZE, "8k", 1024, 16 << 20,            \
	  "pcor-shm: bytes per send cell (a multiple of 64)")                  \
	X(SHM_CMA, shm_cma, STRING, "auto", 0, 0,                              \
	  "pcor-shm: single-copy large messages with process_vm_readv: auto "  \
	  "(where the kernel permits) or off (stream them through cells)")     \
	X(SHM_EAGER_MAX, shm_eager_max, SIZE, "64k", 0, 2 << 20,               \
	  "pcor-shm with single copy on: larger sendDMA messages go by "       \
	  "rendezvous (one copy, straight from the sender's memory) instead "  \
	  "of cells; sendCopy keeps to cells up to PCOR_EAGER_MAX")            \
	X(SHM_NT_STORES, shm_nt_stores, STRING, "auto", 0, 0,                 \
	  "pcor-shm: copy messages of 8 KiB or more into cells with "          \
	  "non-temporal stores: auto (while measured cheaper), on or off")     \
	X(SHM_PEERS, shm_peers, INT, "256", 1, 4096,                           \
	  "pcor-shm: processes of one host that can send to one process")      \
	X(SHM_RING_SIZE, shm_ring_size, SIZE, "32k", 4096, 16 << 20,           \
	  "pcor-shm: bytes of each per-pair receive ring (a power of two)")    \
	X(SPIN_NS, spin_ns, INT, "20000", 0, 10000000000LL,                    \
	  "how long a blocking wait spins before it sleeps (ns); a wait on "   \
	  "another process spins up to twice as long as its thread's "         \
	  "recent waits took, if that is under 0.5 ms, and ten times this "    \
	  "(at most 0.5 ms) while they take under a quarter of it; 0: never "  \
	  "spins")                                                             \
	X(STATS, stats, INT, "0", 0, 1,                                        \
	  "1: at finalize, print each port's counters on stderr, one line "    \
	  "per port (pcor-stats,key=value,...)")                               \
	X(UNAUTH_MAX, unauth_max, INT, "256", 1, 65536,                        \
	  "directory agent: connections still authenticating, in total; "     \
	  "past it the oldest is closed (members are never counted)")         \
	X(UNAUTH_PER_ADDR, unauth_per_addr, INT, "64", 1, 65536,               \
	  "directory agent: connections still authenticating from one IP "     \
	  "address; past it that address's oldest is closed")                 \
	X(UNEXP_BYTES, unexp_bytes, SIZE, "1g", 0, (1LL << 46),                \
	  "bytes of unexpected message data held at once per process")

typedef enum pcori_knob_type {
	PCORI_KNOB_INT,
	PCORI_KNOB_SIZE,
	PCORI_KNOB_STRING,
} pcori_knob_type_t;

typedef struct pcori_config {
#define PCORI_KNOB_FIELD_INT(f) int64_t f;
#define PCORI_KNOB_FIELD_SIZE(f) int64_t f;
#define PCORI_KNOB_FIELD_STRING(f) char f[256];
#define PCORI_KNOB_FIELD_(N, f, t, d, mn, mx, h) PCORI_KNOB_FIELD_##t(f)
	PCORI_KNOBS(PCORI_KNOB_FIELD_)
#undef PCORI_KNOB_FIELD_
} pcori_config_t;

/* One row of the knob table, for pcor_info and the parser. */
typedef struct pcori_knob {
	const char *name; /* without the PCOR_ prefix */
	pcori_knob_type_t type;
	const char *defval;
	int64_t min, max;
	const char *help;
	size_t offset; /* of the field in pcori_config_t */
} pcori_knob_t;

extern const pcori_knob_t pcori_knobs[];
extern const size_t pcori_nknobs;

/*
 * Fill cfg from the environment (defaults where unset).  On a malformed
 * or out-of-range value, logs the knob and returns PCOR_ERR_INVAL.
 */
int pcori_config_load(pcori_config_t *cfg);

/* Format a knob's current value from cfg into buf. */
void pcori_config_format(const pcori_config_t *cfg, const pcori_knob_t *k,
			 char *buf, size_t len);

/* Parse "12", "64k", "2m", "1g" into *out.  Returns 0 or -1. */
int pcori_parse_size(const char *s, int64_t *out);


#endif /* PCOR_CORE_KNOBS_H */
