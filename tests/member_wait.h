/*
 * member_wait.h -- for tests of peer loss: wait, bounded, for the
 * directory's news that one process failed (pcor_member_callback).
 */
#ifndef PCOR_TEST_MEMBER_WAIT_H
#define PCOR_TEST_MEMBER_WAIT_H

#include "harness.h"

#include <pthread.h>
#include <stdbool.h>

typedef struct th_member_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pid;     /* the process watched */
	bool failed; /* its failure was reported */
} th_member_wait_t;

static inline th_member_wait_t *th_member_wait(void)
{
	static th_member_wait_t w = {PTHREAD_MUTEX_INITIALIZER,
				     PTHREAD_COND_INITIALIZER, -1, false};
	return &w;
}

static inline void th_member_event(int pid, pcor_member_event_t ev,
				   void *arg)
{
	th_member_wait_t *w = th_member_wait();
	(void)arg;
	pthread_mutex_lock(&w->mu);
	if (pid == w->pid && ev == PCOR_MEMBER_FAILURE) {
		w->failed = true;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}

/* From now on, note the failure of process pid. */
static inline void th_watch_failure(int pid)
{
	th_member_wait_t *w = th_member_wait();
	pthread_mutex_lock(&w->mu);
	w->pid = pid;
	w->failed = false;
	pthread_mutex_unlock(&w->mu);
	CHECK_OK(pcor_member_callback(th_member_event, NULL));
}

/* Wait at most secs seconds for that failure; the test fails without. */
static inline void th_await_failure(long secs)
{
	th_member_wait_t *w = th_member_wait();
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	pthread_mutex_lock(&w->mu);
	while (!w->failed)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until))
			break;
	bool seen = w->failed;
	pthread_mutex_unlock(&w->mu);
	CHECK(seen);
}

#endif
