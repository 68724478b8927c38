/*
 * proc.c -- what the kernel says of another process on this host.
 */
#include "core.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool pcori_os_proc_running(pid_t os, uint64_t *cpu_p)
{
	char path[48], buf[1024];
	if (os <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)os);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold anything, up to the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return false;
	char state = p[2];
	/* Stopped (signal or tracer), zombie, dead: not running. */
	if (state == 'T' || state == 't' || state == 'Z' || state == 'X' ||
	    state == 'x')
		return false;
	/* Fields 14 and 15, user and system time: 11 and 12 after state. */
	p += 3;
	for (int field = 4; field < 14; field++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	char *end;
	unsigned long long ut = strtoull(p, &end, 10);
	if (end == p || *end != ' ')
		return false;
	p = end + 1;
	unsigned long long st = strtoull(p, &end, 10);
	if (end == p)
		return false;
	*cpu_p = ut + st;
	return true;
}
