/*
 * status -- the status list: every code has its own value, name and
 * description; the conventions on signs hold; unknown codes are named as
 * such.  Runs before pcor_init, as the header allows.
 */
#include "../common.h"

#include <limits.h>

struct row {
	const char *name; /* from the X-macro */
	int value;
	const char *desc;
};

static const struct row rows[] = {
#define ROW_(name, value, desc) {#name, value, desc},
	PCOR_STATUS_MAP(ROW_)
#undef ROW_
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

int main(void)
{
	CHECK(PCOR_OK == 0);
	CHECK(PCOR_INPROGRESS > 0);
	CHECK(NROWS >= 30);
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		/* Errors are negative, the two others are not. */
		if (!strncmp(r->name, "ERR_", 4))
			CHECK(r->value < 0);
		else
			CHECK(r->value >= 0);
		/* Both functions answer from the one list. */
		CHECK(!strcmp(pcor_status_name(r->value), r->name));
		CHECK(!strcmp(pcor_strerror(r->value), r->desc));
		CHECK(strlen(r->desc) > 0);
		CHECK(strcmp(r->desc, "unknown status") != 0);
		for (size_t j = 0; j < i; j++) {
			CHECK(rows[j].value != r->value);
			CHECK(strcmp(rows[j].name, r->name) != 0);
			CHECK(strcmp(rows[j].desc, r->desc) != 0);
			/* Distinct strings, not only distinct table rows. */
			CHECK(strcmp(pcor_strerror(rows[j].value),
				     pcor_strerror(r->value)) != 0);
		}
	}

	/* Codes just outside the list, and far away. */
	int lo = 0, hi = 0;
	for (size_t i = 0; i < NROWS; i++) {
		lo = rows[i].value < lo ? rows[i].value : lo;
		hi = rows[i].value > hi ? rows[i].value : hi;
	}
	const int unknown[] = {lo - 1, hi + 1, INT_MIN, INT_MAX, -1000, 77};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		CHECK(!strcmp(pcor_strerror(unknown[i]), "unknown status"));
		CHECK(!strcmp(pcor_status_name(unknown[i]), "UNKNOWN"));
	}
	return 0;
}
