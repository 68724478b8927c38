/*
 * status.c -- pcor_strerror and pcor_status_name, generated from the one
 * status list in pcor.h.
 */
#include "core.h"

PCOR_API const char *pcor_strerror(int status)
{
	switch (status) {
#define PCORI_STATUS_STR_(name, value, desc)                                   \
	case PCOR_##name:                                                      \
		return desc;
		PCOR_STATUS_MAP(PCORI_STATUS_STR_)
#undef PCORI_STATUS_STR_
	}
	return "unknown status";
}

PCOR_API const char *pcor_status_name(int status)
{
	switch (status) {
#define PCORI_STATUS_NAME_(name, value, desc)                                  \
	case PCOR_##name:                                                      \
		return #name;
		PCOR_STATUS_MAP(PCORI_STATUS_NAME_)
#undef PCORI_STATUS_NAME_
	}
	return "UNKNOWN";
}
