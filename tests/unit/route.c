/*
 * route -- shortest paths of src/route: direct links, a gateway between
 * two networks, the cheaper class winning, ties broken alike everywhere,
 * departed members and unreachable destinations.
 */
#include "route/route.h"

#include "../common.h"

#define N 6

static pcori_member_t mem[N];
static const pcori_member_t *view[N];

/* Member pid with ports on the networks given ("net/class" pairs). */
static void member(int pid, int nports, const char *const *nets,
		   const int *classes)
{
	memset(&mem[pid], 0, sizeof(mem[pid]));
	mem[pid].pid = pid;
	mem[pid].state = PCORI_MEMBER_ALIVE;
	mem[pid].nports = nports;
	for (int i = 0; i < nports; i++) {
		snprintf(mem[pid].ports[i].network,
			 sizeof(mem[pid].ports[i].network), "%s", nets[i]);
		mem[pid].ports[i].link_class = (uint8_t)classes[i];
	}
	view[pid] = &mem[pid];
}

static void compute(int src, pcori_route_entry_t *out)
{
	CHECK_OK(pcori_route_compute(view, N, src, out));
}

int main(void)
{
	pcori_route_entry_t r[N];
	const char *n1 = "tcp;ofi_rxm/10.1.0.0/24";
	const char *n2 = "udp;ofi_rxd/10.2.0.0/24";
	const char *n3 = "tcp;ofi_rxm/10.3.0.0/24";
	const int tcp = PCORI_LINK_TCP, udp = PCORI_LINK_UDP;

	/* Costs: each class dearer than any two of the cheaper one. */
	for (int c = PCORI_LINK_SELF; c < PCORI_LINK_UDP; c++)
		CHECK(pcori_link_cost(c + 1) > 2 * pcori_link_cost(c));

	/* A(0) n1; B(1) n1+n2; C(2) n2; G(3) n1+n2; E(4) n1; 5 absent. */
	member(0, 1, (const char *[]){n1}, (int[]){tcp});
	member(1, 2, (const char *[]){n1, n2}, (int[]){tcp, udp});
	member(2, 1, (const char *[]){n2}, (int[]){udp});
	member(3, 2, (const char *[]){n2, n1}, (int[]){udp, tcp});
	member(4, 1, (const char *[]){n1}, (int[]){tcp});
	view[5] = NULL;

	compute(0, r);
	CHECK(r[0].next_hop == 0 && r[0].hops == 0 && r[0].cost == 0);
	CHECK(r[1].next_hop == 1 && r[1].hops == 1 && r[1].port == 0 &&
	      r[1].peer_port == 0 && r[1].link_class == tcp);
	/* Two equal gateways: the lower pid, so every process agrees. */
	CHECK(r[2].next_hop == 1 && r[2].hops == 2 && r[2].port == 0 &&
	      r[2].peer_port == 0 && r[2].link_class == tcp);
	CHECK(r[2].cost == pcori_link_cost(tcp) + pcori_link_cost(udp));
	CHECK(r[4].next_hop == 4 && r[4].hops == 1);
	CHECK(r[5].next_hop == -1 && r[5].port == -1);
	/* From C the gateway's port on net2 is its second (index 1). */
	compute(2, r);
	CHECK(r[0].next_hop == 1 && r[0].hops == 2 && r[0].link_class == udp);
	CHECK(r[1].peer_port == 1 && r[3].peer_port == 0);

	/* B gone: through G; G gone too: unreachable. */
	view[1] = NULL;
	compute(0, r);
	CHECK(r[2].next_hop == 3 && r[2].hops == 2 && r[2].peer_port == 1);
	CHECK(r[1].next_hop == -1);
	view[3] = NULL;
	compute(0, r);
	CHECK(r[2].next_hop == -1 && r[4].next_hop == 4);

	/*
	 * A direct udp link against two tcp links: udp costs more than two
	 * tcp hops, so the tcp path through B wins.
	 */
	member(1, 2, (const char *[]){n1, n3}, (int[]){tcp, tcp});
	member(2, 2, (const char *[]){n2, n3}, (int[]){udp, tcp});
	member(0, 2, (const char *[]){n1, n2}, (int[]){tcp, udp});
	view[3] = NULL;
	compute(0, r);
	CHECK(r[2].next_hop == 1 && r[2].hops == 2 && r[2].link_class == tcp);

	/* A source that is not a member reaches nobody. */
	view[0] = NULL;
	compute(0, r);
	for (int p = 0; p < N; p++)
		CHECK(r[p].next_hop == -1);
	printf("route: ok\n");
	return 0;
}
