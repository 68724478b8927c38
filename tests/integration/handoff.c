/*
 * handoff -- one thread id passes from owner to owner while a sender
 * keeps sending to it.  Each owner attaches, receives some messages,
 * posts a few more receives and detaches while messages still arrive:
 * its receives either got the next messages (in post order) or were
 * canceled, and whatever it did not take waits for the next owner.
 * Across all owners every message arrives exactly once, in order.
 */
#include "../common.h"

#define TOTAL 20000
#define EXTRA 8      /* receives left posted at each detach */
#define MAX_LEN 128
#define SEED 77

static int sender_thid, target = -1;
static uint32_t next_seq; /* handed from owner to owner through joins */
static uint64_t rs = SEED;
static pthread_barrier_t first;

static size_t len_of(uint32_t seq)
{
	return sizeof(seq) + th_mix(seq) % (MAX_LEN - sizeof(seq));
}

static void check_msg(const uint8_t *buf, const pcor_msginfo_t *info)
{
	uint32_t seq;
	CHECK(info->size >= sizeof(seq));
	memcpy(&seq, buf, sizeof(seq));
	if (seq != next_seq)
		fprintf(stderr, "got seq %u, expected %u\n", seq, next_seq);
	CHECK(seq == next_seq);
	CHECK(info->thid == sender_thid && info->tag == (int)(seq % 4));
	CHECK(info->size == len_of(seq));
	CHECK_REF(buf + sizeof(seq), info->size - sizeof(seq), seq);
	next_seq++;
}

static void *sender(void *arg)
{
	(void)arg;
	uint8_t buf[MAX_LEN];
	for (uint32_t seq = 0; seq < TOTAL; seq++) {
		size_t len = len_of(seq);
		memcpy(buf, &seq, sizeof(seq));
		th_ref_fill(buf + sizeof(seq), len - sizeof(seq), seq);
		pcor_handle_t h = th_send_copy(0, target, (int)(seq % 4), buf,
					       len);
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	return NULL;
}

/* One owner: receive `want` messages, then leave with EXTRA posted. */
static void *owner(void *arg)
{
	uint32_t want = (uint32_t)(uintptr_t)arg;
	int id;
	CHECK_OK(pcor_thread_attach(&id));
	if (target < 0) {
		target = id;
		th_barrier_wait(&first); /* main may start the sender */
		th_barrier_wait(&first); /* sender_thid is set */
	}
	CHECK(id == target); /* the lowest free id, every time */
	uint8_t buf[MAX_LEN];
	for (uint32_t i = 0; i < want && next_seq < TOTAL; i++) {
		pcor_msginfo_t info;
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
					PCOR_ANY_TAG, buf, sizeof(buf), &info,
					&h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		check_msg(buf, &info);
	}
	static uint8_t xbuf[EXTRA][MAX_LEN];
	pcor_msginfo_t xinfo[EXTRA];
	pcor_handle_t xh[EXTRA];
	for (int k = 0; k < EXTRA; k++)
		CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
					PCOR_ANY_TAG, xbuf[k], MAX_LEN,
					&xinfo[k], &xh[k]));
	CHECK_OK(pcor_thread_detach());
	/* Completed ones first, in post order, then only canceled ones. */
	bool canceled = false;
	for (int k = 0; k < EXTRA; k++) {
		int rc = pcor_handle_test(xh[k], PCOR_BLOCK);
		if (rc == PCOR_ERR_CANCELED) {
			canceled = true;
			continue;
		}
		CHECK_OK(rc);
		CHECK(!canceled);
		check_msg(xbuf[k], &xinfo[k]);
	}
	return NULL;
}

static void *last_owner(void *arg)
{
	(void)arg;
	int id;
	CHECK_OK(pcor_thread_attach(&id));
	CHECK(id == target);
	char b[4];
	pcor_handle_t h, sh;
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, b,
				sizeof(b), NULL, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_send_copy(0, id, 1, "me", 3, &sh));
	CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, "me"));
	CHECK_OK(pcor_thread_detach());
	return NULL;
}

int main(void)
{
	th_ref_init(MAX_LEN);
	CHECK_OK(pcor_init(NULL, NULL));
	th_barrier_init(&first, 2);
	pthread_t t;
	th_thread_start(&t, owner, (void *)(uintptr_t)10);
	th_barrier_wait(&first); /* the target id is known */
	CHECK_OK(pcor_thread_create(sender, NULL, &sender_thid));
	th_barrier_wait(&first);
	th_thread_join(t);
	int rounds = 1;
	while (next_seq < TOTAL) {
		CHECK(rounds < TOTAL);
		uint32_t want = (uint32_t)(th_rand(&rs) % 200);
		th_thread_start(&t, owner, (void *)(uintptr_t)want);
		th_thread_join(t);
		rounds++;
	}
	CHECK(next_seq == TOTAL);
	CHECK_OK(pcor_thread_join(sender_thid, NULL));
	printf("%d owners\n", rounds);

	/* Nothing is left for the id. */
	th_thread_start(&t, last_owner, NULL);
	th_thread_join(t);
	pthread_barrier_destroy(&first);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
