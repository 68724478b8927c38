/*
 * ring -- the short pcor demo: threads pass messages around a ring.
 *
 * Each of N threads receives a token from its left neighbour, adds its id
 * and sends it on (sendCopy/recvCopy), for a number of laps; then a DMA
 * buffer travels the ring by hand-over (sendDMA/recvDMA), each thread
 * writing its mark into it without a byte being copied.
 *
 * usage: ring [threads] [laps]
 */
#include <pcor/pcor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_START 0
#define TAG_TOKEN 1
#define TAG_DMA 2

struct ring {
	int n, laps;
	int *thid; /* ring position -> thread id */
};

static struct ring R;

static int die(const char *what, int rc)
{
	fprintf(stderr, "ring: %s: %s\n", what, pcor_strerror(rc));
	exit(1);
}

static void *member(void *arg)
{
	int pos = (int)(intptr_t)arg;
	long token;
	int apid, athid, atag, asize, h, rc;

	/* Wait until main says the ring is complete; it sends our successor. */
	int next;
	h = recvCopy(PCOR_ANY_PID, PCOR_ANY_THID, TAG_START, &next,
		     sizeof(next), &apid, &athid, &atag, &asize);
	if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)) != PCOR_OK)
		die("recvCopy", h < 0 ? h : rc);

	/* Position 0 starts each lap; the others pass the token on. */
	for (int lap = 0; lap < R.laps; lap++) {
		if (pos == 0) {
			token = 0;
			h = sendCopy(0, next, TAG_TOKEN, &token, sizeof(token));
			if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)))
				die("sendCopy", h < 0 ? h : rc);
		}
		h = recvCopy(PCOR_ANY_PID, PCOR_ANY_THID, TAG_TOKEN, &token,
			     sizeof(token), &apid, &athid, &atag, &asize);
		if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)) != PCOR_OK)
			die("recvCopy", h < 0 ? h : rc);
		if (pos == 0) {
			printf("lap %d: token back from thread %d, sum of ids "
			       "%ld\n",
			       lap, athid, token);
			continue;
		}
		token += pcor_self_thid();
		h = sendCopy(0, next, TAG_TOKEN, &token, sizeof(token));
		if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)))
			die("sendCopy", h < 0 ? h : rc);
	}

	/*
	 * The DMA lap: one buffer goes round, owned by one thread at a time.
	 * Position 0 gets it from main, and once more when it comes back.
	 */
	for (int round = 0; round < (pos == 0 ? 2 : 1); round++) {
		char *page;
		h = recvDMA(PCOR_ANY_PID, PCOR_ANY_THID, TAG_DMA,
			    (void **)&page, &apid, &athid, &atag, &asize);
		if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)) != PCOR_OK)
			die("recvDMA", h < 0 ? h : rc);
		if (round == 1) {
			printf("dma buffer %p came back: \"%s\"\n",
			       (void *)page, page);
			pcor_dma_free(page);
			break;
		}
		size_t used = strlen(page);
		snprintf(page + used, (size_t)asize - used, " %d",
			 pcor_self_thid());
		pcor_handle_t sh;
		rc = pcor_send_dma(0, next, TAG_DMA, page, (size_t)asize,
				   PCOR_SEND_HANDOVER, &sh);
		if (rc || (rc = pcor_handle_test(sh, PCOR_BLOCK)))
			die("pcor_send_dma", rc);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rc = pcor_init(&argc, &argv);
	if (rc)
		die("pcor_init", rc);
	R.n = argc > 1 ? atoi(argv[1]) : 8;
	R.laps = argc > 2 ? atoi(argv[2]) : 3;
	if (R.n < 2 || R.laps < 1) {
		fprintf(stderr, "usage: ring [threads >= 2] [laps >= 1]\n");
		return 2;
	}
	R.thid = calloc((size_t)R.n, sizeof(int));
	for (int i = 0; i < R.n; i++)
		if ((rc = pcor_thread_create(member, (void *)(intptr_t)i,
					     &R.thid[i])))
			die("pcor_thread_create", rc);
	printf("%d threads in a ring, %d laps\n", R.n, R.laps);
	for (int i = 0; i < R.n; i++) {
		int next = R.thid[(i + 1) % R.n];
		int h = sendCopy(0, R.thid[i], TAG_START, &next, sizeof(next));
		if (h < 0 || (rc = testHandle(h, PCOR_BLOCK)))
			die("sendCopy", h < 0 ? h : rc);
	}

	/* Start the DMA buffer at ring position 0. */
	char *page;
	if ((rc = pcor_dma_alloc(4096, (void **)&page)))
		die("pcor_dma_alloc", rc);
	strcpy(page, "marks:");
	pcor_handle_t sh;
	if ((rc = pcor_send_dma(0, R.thid[0], TAG_DMA, page, 4096,
				PCOR_SEND_HANDOVER, &sh)) ||
	    (rc = pcor_handle_test(sh, PCOR_BLOCK)))
		die("pcor_send_dma", rc);

	for (int i = 0; i < R.n; i++)
		pcor_thread_join(R.thid[i], NULL);
	free(R.thid);
	return pcor_finalize() ? 1 : 0;
}
