#include "mv.h"
int mv_serve(const mv_map_t *m, mv_loader_t *l, int port, int seconds)
{
	(void)m; (void)l; (void)port; (void)seconds;
	return -1;
}
