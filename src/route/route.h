/*
 * route.h -- private interface of src/route: routes over every port of
 * every process.
 *
 * Pure computation: given what the directory knows of the members (their
 * ports, each on a network), find for every destination the cheapest path
 * over "both processes have a port on this network" links, weighted by
 * link class (same process < shared memory < RDMA < tcp < udp).  The
 * dispatch layer turns the first hop into a port and an address.
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

#endif /* PCOR_ROUTE_H */
