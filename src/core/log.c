/*
 * log.c -- leveled, per-subsystem logging configured by PCOR_LOG_LEVEL,
 * PCOR_LOG_SUBSYS and PCOR_LOG_FILE.  One event per line:
 *   pcor[<pid>.<thid>] <level> <subsys>: <message>
 */
#include "core.h"

#include <strings.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug",
					  "trace"};
static const char *const subsys_names[PCORI_SUB_COUNT_] = {
	"core", "frag", "dispatch", "naming", "route", "mpi", "app"};

/* Written once at init (before other threads), read-only afterwards. */
static struct {
	int level;
	unsigned subsys_mask;
	FILE *file; /* NULL: stderr */
} logcfg = {PCORI_LOG_WARN, ~0u, NULL};

static int parse_level(const char *s)
{
	for (size_t i = 0; i < PCORI_ARRAY_LEN(level_names); i++)
		if (!strcasecmp(s, level_names[i]))
			return (int)i;
	return -1;
}

static int parse_subsys(const char *s, unsigned *mask)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	*mask = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcasecmp(tok, "all")) {
			*mask = ~0u;
			continue;
		}
		int found = 0;
		for (int i = 0; i < PCORI_SUB_COUNT_; i++)
			if (!strcasecmp(tok, subsys_names[i])) {
				*mask |= 1u << i;
				found = 1;
			}
		if (!found)
			return -1;
	}
	return 0;
}

int pcori_log_init(const pcori_config_t *cfg)
{
	int lvl = parse_level(cfg->log_level);
	unsigned mask;
	if (lvl < 0) {
		fprintf(stderr, "pcor: PCOR_LOG_LEVEL=\"%s\": unknown level\n",
			cfg->log_level);
		return PCOR_ERR_INVAL;
	}
	if (parse_subsys(cfg->log_subsys, &mask)) {
		fprintf(stderr,
			"pcor: PCOR_LOG_SUBSYS=\"%s\": unknown subsystem\n",
			cfg->log_subsys);
		return PCOR_ERR_INVAL;
	}
	FILE *f = NULL;
	if (cfg->log_file[0]) {
		f = fopen(cfg->log_file, "ae");
		if (!f) {
			fprintf(stderr, "pcor: PCOR_LOG_FILE=\"%s\": cannot open\n",
				cfg->log_file);
			return PCOR_ERR_INVAL;
		}
		setvbuf(f, NULL, _IOLBF, 0);
	}
	logcfg.level = lvl;
	logcfg.subsys_mask = mask;
	logcfg.file = f;
	return PCOR_OK;
}

void pcori_log_fini(void)
{
	if (logcfg.file)
		fclose(logcfg.file);
	logcfg.file = NULL;
	logcfg.level = PCORI_LOG_WARN;
	logcfg.subsys_mask = ~0u;
}

bool pcori_log_enabled(pcori_log_level_t lvl, pcori_subsys_t sub)
{
	return (int)lvl <= logcfg.level && (logcfg.subsys_mask >> sub & 1u);
}

void pcori_log(pcori_log_level_t lvl, pcori_subsys_t sub, const char *fmt, ...)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "pcor[%d.%d] %s %s: ",
			 pcori_rt.pid, pcori_self_thid(), level_names[lvl],
			 subsys_names[sub]);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line keeps lines from different threads whole. */
	if (logcfg.file) {
		fwrite(line, 1, (size_t)n, logcfg.file);
	} else {
		ssize_t w = write(STDERR_FILENO, line, (size_t)n);
		(void)w;
	}
}
