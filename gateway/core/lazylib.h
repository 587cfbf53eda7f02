/*
 * A shared library opened at its first use rather than at start: dlopen by
 * soname, then every function its users call looked up into a table of typed
 * pointers, all or nothing. A start that never needs the library neither maps
 * it nor its dependencies (docs/performance.md).
 */
#ifndef TOLLGATE_CORE_LAZYLIB_H
#define TOLLGATE_CORE_LAZYLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* One function of the table: its name and where its pointer lives. */
struct gw_lazysym {
	const char *name;
	size_t offset; /* in the table */
};

struct gw_lazylib {
	const char *soname;  /* "libcurl.so.4" */
	const char *package; /* the Debian package that ships it, for the error */
	const struct gw_lazysym *syms;
	size_t nsyms;
	void *table; /* the typed pointers, filled by gw_lazylib_load */
	size_t table_size;
	/* Set by gw_lazylib_load, under lock; the table is read only once ok. */
	pthread_mutex_t lock;
	bool tried, ok;
	char why[256];
};

/* A library's static description (lock and state start zeroed). */
#define GW_LAZYLIB_INIT(so, pkg, symtab, tab)                                                      \
	{                                                                                          \
		.soname = (so), .package = (pkg), .syms = (symtab),                                \
		.nsyms = sizeof(symtab) / sizeof((symtab)[0]), .table = (tab),                     \
		.table_size = sizeof(*(tab)), .lock = PTHREAD_MUTEX_INITIALIZER,                   \
	}

/*
 * Opens the library once (RTLD_NOW | RTLD_LOCAL) and fills its table; later
 * calls answer from the first. Safe from any thread. 0, or -ENOENT with err
 * "cannot load SONAME: WHY; install PACKAGE" (the library missing, or one of
 * the functions: then the table stays empty and the library is closed).
 */
int gw_lazylib_load(struct gw_lazylib *l, char *err, size_t errlen);

#endif
