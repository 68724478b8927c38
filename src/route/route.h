/*
 * route.h -- private interface of src/route: routes over every port of
 * every process.
 *
 * Objects, one file each:
 *   route.c   the computation, pure: given what the directory knows of
 *             the members (their ports, each on a network), the cheapest
 *             path to every destination over "both processes have a port
 *             on this network" links, weighted by link class (same
 *             process < shared memory < RDMA < tcp < udp)
 *   table.c   this process's route table: built from a snapshot of the
 *             directory, looked up, marked stale on membership events and
 *             rebuilt, and the peers' replaced routes kept until finalize
 *   public.c  the public face: pcor_route_info, pcor_route_dump,
 *             placement (pcor_place_best, pcor_*_spawn_near)
 *
 * route.c and table.c use core and naming only; the peer table
 * (frag/peer.c) turns a table entry into a peer's route (a port and an
 * address) and moves its peers onto a rebuilt table.  public.c answers
 * with what a send would use, so it reads the peers and ports
 * (frag/msg.h), as src/api does.
 */
#ifndef PCOR_ROUTE_H
#define PCOR_ROUTE_H

#include "../naming/naming.h"

/* Cost of one link of a class; a path costs the sum of its links. */
int pcori_link_cost(int link_class);

/* One destination's route from the source of a computation. */
typedef struct pcori_route_entry {
	int next_hop;   /* first process on the path; -1: unreachable */
	int port;       /* the source's port (index) towards next_hop */
	int peer_port;  /* next_hop's port (index) on that network */
	int hops;       /* links on the path (1: direct) */
	int cost;       /* sum of link costs */
	int link_class; /* class of the first link */
} pcori_route_entry_t;

/*
 * Shortest paths from src.  members[pid] (n of them) is NULL for a pid
 * that is not an alive member.  out[pid] is filled for every pid (src
 * itself: next_hop src, hops 0).  Ties go to fewer hops, then the lower
 * next hop, so every process computes the same paths.  PCOR_OK or
 * PCOR_ERR_NOMEM.
 */
int pcori_route_compute(const pcori_member_t *const *members, int n, int src,
			pcori_route_entry_t *out);

/* ------------------------------------------------------------- table */

struct pcori_port; /* a port of this process (port/port.h) */

/*
 * How a peer is reached: our port and the address of the next hop on
 * it.  Immutable once published; a rebuilt route replaces the pointer
 * (old ones are kept until finalize), so senders read it without a lock.
 */
typedef struct pcori_route {
	struct pcori_port *port;
	uint64_t dest;   /* the next hop's address on port */
	int next_hop;    /* pid of the next hop (the peer itself: direct) */
	int hops;
	int link_class;  /* of the first link */
} pcori_route_t;

/*
 * Snapshot of the alive members (NULL where none), *n_p of them; free
 * with pcori_members_free.  PCOR_INPROGRESS: complete but for members
 * not known here yet.
 */
int pcori_members_snapshot(pcori_member_t ***members_p, int *n_p);
void pcori_members_free(pcori_member_t **members, int n);

/*
 * What the table says about pid, copied out, and the next hop's port on
 * that network (rebuilt first if stale or too short).  false: no route.
 */
bool pcori_routes_lookup(int pid, pcori_route_entry_t *e_p,
			 pcori_port_info_t *hop_port_p);
/*
 * A copy of the route table (rebuilt first if stale), indexed by pid, n
 * entries; the caller frees it.  PCOR_OK or PCOR_ERR_NOMEM.
 */
int pcori_routes_copy(pcori_route_entry_t **tab_p, int *n_p);
/*
 * Membership changed: the table is rebuilt when next used or due.  Whoever
 * drives progress is to be woken by the caller (pcori_timers_kick).
 */
void pcori_routes_stale(void);
/* The table is stale and may be rebuilt now (the timers' check). */
bool pcori_routes_due(void);
/*
 * Recompute the table now (no lock held).  PCOR_OK; otherwise the view
 * was partial or failed, the old table stays and is retried 10 ms later.
 */
int pcori_routes_rebuild(void);
/* A peer's route was replaced: keep r until finalize (readers hold it). */
void pcori_route_retire(pcori_route_t *r);
/* Free the table and the retired routes (finalize). */
void pcori_routes_fini(void);

#endif /* PCOR_ROUTE_H */
