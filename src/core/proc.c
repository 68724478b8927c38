/*
 * proc.c -- what the kernel says of a process on this host.
 */
#include "core.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What /proc/<pid>/stat says: its state letter, CPU time and start. */
typedef struct proc_stat {
	long pid;
	char state;
	uint64_t cpu;   /* fields 14 and 15: user and system time */
	uint64_t start; /* field 22 */
} proc_stat_t;

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n > 0)
		buf[n] = '\0';
	return n;
}

/* The n-th space-separated field after p (p itself is the 0th). */
static char *field_after(char *p, int n)
{
	while (p && n-- > 0) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p;
}

static bool number_at(const char *p, uint64_t *v)
{
	char *end;
	if (!p || *p < '0' || *p > '9')
		return false;
	*v = strtoull(p, &end, 10);
	return *end == ' ' || *end == '\n' || *end == '\0';
}

static bool stat_read(const char *path, proc_stat_t *st)
{
	char buf[1024];
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	st->pid = strtol(buf, NULL, 10);
	/* "pid (comm) S ...": comm may hold anything, up to the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return false;
	p += 2; /* field 3, the state */
	st->state = *p;
	uint64_t ut, sy;
	if (!number_at(field_after(p, 11), &ut) ||
	    !number_at(field_after(p, 12), &sy) ||
	    !number_at(field_after(p, 19), &st->start))
		return false;
	st->cpu = ut + sy;
	return true;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool boot_id(uint8_t out[16])
{
	char buf[64];
	if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof(buf)) <= 0)
		return false;
	int n = 0;
	for (const char *c = buf; *c && *c != '\n' && n < 32; c++) {
		if (*c == '-')
			continue;
		int d = hex_digit(*c);
		if (d < 0)
			return false;
		out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | d : d << 4);
		n++;
	}
	return n == 32;
}

void pcori_os_proc_self(pcori_os_proc_t *me)
{
	memset(me, 0, sizeof(*me));
	struct stat ns, net;
	proc_stat_t st;
	/*
	 * A /proc of another pid namespace (mounted from outside) would
	 * number processes differently: then we cannot tell.
	 */
	if (!boot_id(me->boot) || stat("/proc/self/ns/pid", &ns) != 0 ||
	    stat("/proc/self/ns/net", &net) != 0 ||
	    !stat_read("/proc/self/stat", &st) || st.pid != (long)getpid()) {
		memset(me, 0, sizeof(*me));
		return;
	}
	me->pidns = (uint64_t)ns.st_ino;
	me->netns = (uint64_t)net.st_ino;
	me->start = st.start;
	me->ospid = (int32_t)getpid();
}

bool pcori_os_proc_running(const pcori_os_proc_t *who,
			   const pcori_os_proc_t *me, uint64_t *cpu_p)
{
	static const uint8_t unknown[16];
	if (who->ospid <= 0 || !memcmp(who->boot, unknown, sizeof(unknown)))
		return false;
	if (memcmp(me->boot, who->boot, sizeof(me->boot)) ||
	    me->pidns != who->pidns || me->netns != who->netns)
		return false; /* another host, or namespaces of its own */
	char path[48];
	proc_stat_t st;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)who->ospid);
	if (!stat_read(path, &st) || st.start != who->start)
		return false; /* gone, or its pid is another's now */
	/* Stopped (signal or tracer), zombie, dead: not running. */
	if (!st.state || strchr("TtZXx", st.state))
		return false;
	*cpu_p = st.cpu;
	return true;
}
