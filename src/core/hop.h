/*
 * hop.h -- hop probes: where a small message's hop spends its time.
 *
 * Built in with meson -Dhop_probe=true, compiled to nothing otherwise.  A
 * thread that takes a fast pcor-shm record out of a ring and then sends
 * one (a ping-pong's answer) stamps the time-stamp counter at each point
 * below; at pcor_finalize the calling thread prints the mean of each
 * stretch and the locks it took between the record and the answer.  The
 * sender also writes its counter into the spare end of the record's line
 * (no extra line moves), so the receiver sees how long the record took
 * from its publication to the poll that found it.
 *
 * Each stamp is an lfence and an rdtsc (about 18 ns here, printed with
 * the results), so a stretch holds the misses of its own loads: the
 * stretches include the stamps' own cost.  The counter must run at
 * one rate on every core (constant_tsc, as on current x86 and VMs).
 */
#ifndef PCORI_HOP_H
#define PCORI_HOP_H

#include <stddef.h>
#include <stdint.h>

typedef enum pcori_hop_point {
	PCORI_HOP_SEEN,     /* the waiter's poll found the record */
	PCORI_HOP_MATCHED,  /* its receive matched, filled and completed */
	PCORI_HOP_LEFT,     /* the waiter's poll loop ended */
	PCORI_HOP_RETURNED, /* the test or wait returns to the application */
	PCORI_HOP_SEND,     /* the application's answer enters the send path */
	PCORI_HOP_COMMIT,   /* the answer's record is published */
	PCORI_HOP_NPOINTS
} pcori_hop_point_t;

#if defined(PCORI_HOP_PROBE) && PCORI_HOP_PROBE && \
	(defined(__x86_64__) || defined(__i386__))

/* Where the record's sender stamps its counter, from the record's start. */
#define PCORI_HOP_STAMP_AT 56

void pcori_hop_mark(pcori_hop_point_t pt);
/* The waiter found a record at rec (its line's start), len bytes with
 * its header. */
void pcori_hop_seen(const uint8_t *rec, size_t len);
/* A record at rec, len bytes with its header, is about to be published. */
void pcori_hop_stamp(uint8_t *rec, size_t len);
void pcori_hop_lock(void);
void pcori_hop_report(void);

#define PCORI_HOP(pt) pcori_hop_mark(pt)
#define PCORI_HOP_SEEN_REC(rec, len) pcori_hop_seen(rec, len)
#define PCORI_HOP_STAMP(rec, len) pcori_hop_stamp(rec, len)
#define PCORI_HOP_LOCK() pcori_hop_lock()
#define PCORI_HOP_REPORT() pcori_hop_report()

#else

#define PCORI_HOP(pt) ((void)0)
#define PCORI_HOP_SEEN_REC(rec, len) ((void)(rec), (void)(len))
#define PCORI_HOP_STAMP(rec, len) ((void)(rec), (void)(len))
#define PCORI_HOP_LOCK() ((void)0)
#define PCORI_HOP_REPORT() ((void)0)

#endif
#endif /* PCORI_HOP_H */
