/*
 * port.c -- the port kinds, found by the names PCOR_PROVIDERS lists: our
 * own (pcor-shm) by name, and every other name as a libfabric provider.
 */
#include "port.h"

#include <string.h>

/* A kind's open: up to max ports into ports_p, how many in *n_p. */
typedef int (*open_fn)(const char *name, int index,
		       const pcori_port_params_t *par, pcori_port_t **ports_p,
		       int max, int *n_p);

static int open_shm(const char *name, int index,
		    const pcori_port_params_t *par, pcori_port_t **ports_p,
		    int max, int *n_p)
{
	(void)name;
	*n_p = 0;
	if (max < 1)
		return PCOR_ERR_NOSUPPORT;
	int rc = pcori_port_shm_open(index, par, ports_p);
	*n_p = rc == PCOR_OK;
	return rc;
}

static const struct {
	const char *name; /* NULL: any other name */
	open_fn open;
} kinds[] = {
    {"pcor-shm", open_shm},
    {NULL, pcori_port_ofi_open},
};

int pcori_port_open(const char *name, int index,
		    const pcori_port_params_t *par, pcori_port_t **ports_p,
		    int max, int *n_p)
{
	size_t i = 0;
	while (kinds[i].name && strcmp(kinds[i].name, name))
		i++;
	return kinds[i].open(name, index, par, ports_p, max, n_p);
}
