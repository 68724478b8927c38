/*
 * table.c -- handle tables (see mpii.h): integer handles to objects.
 */
#include <stdlib.h>

#include "mpii.h"

void *pcori_mpi_tab_get(htable_t *t, int i)
{
	if (i < 0 || i >= CHUNK * MAX_CHUNKS)
		return NULL;
	_Atomic(void *) *ch = t->chunk[i / CHUNK];
	return ch ? atomic_load_explicit(&ch[i % CHUNK], memory_order_acquire)
		  : NULL;
}

int pcori_mpi_tab_add(htable_t *t, void *obj, int first)
{
	pthread_mutex_lock(&pcori_mpi.lock);
	int start = t->hint > first ? t->hint : first, i;
	for (int pass = 0; pass < 2; pass++) {
		for (i = pass ? first : start; i < t->nslots; i++)
			if (!atomic_load_explicit(
				&t->chunk[i / CHUNK][i % CHUNK],
				memory_order_relaxed))
				goto found;
	}
	if (i >= CHUNK * MAX_CHUNKS) {
		pthread_mutex_unlock(&pcori_mpi.lock);
		return -1;
	}
	/* Grow by one chunk; slots of a new chunk start empty. */
	_Atomic(void *) *ch = calloc(CHUNK, sizeof(*ch));
	if (!ch) {
		pthread_mutex_unlock(&pcori_mpi.lock);
		return -1;
	}
	t->chunk[t->nslots / CHUNK] = ch;
	i = t->nslots;
	t->nslots += CHUNK;
	if (i < first) { /* first lies beyond: keep growing from there */
		pthread_mutex_unlock(&pcori_mpi.lock);
		return pcori_mpi_tab_add(t, obj, first);
	}
found:
	atomic_store_explicit(&t->chunk[i / CHUNK][i % CHUNK], obj,
			      memory_order_release);
	t->hint = i + 1;
	pthread_mutex_unlock(&pcori_mpi.lock);
	return i;
}

void pcori_mpi_tab_del(htable_t *t, int i)
{
	pthread_mutex_lock(&pcori_mpi.lock);
	atomic_store_explicit(&t->chunk[i / CHUNK][i % CHUNK], NULL,
			      memory_order_release);
	if (i < t->hint)
		t->hint = i;
	pthread_mutex_unlock(&pcori_mpi.lock);
}
