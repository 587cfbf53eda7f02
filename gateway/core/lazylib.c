/*
 * Libraries opened at first use (gateway/core/lazylib.h): one dlopen, one
 * dlsym per function, the table filled only when every function is found.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/core/err.h"
#include "gateway/core/lazylib.h"

static void
lazylib_open(struct gw_lazylib *l)
{
	void *h, *fn;
	const char *e;

	dlerror();
	h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		e = dlerror();
		snprintf(l->why, sizeof(l->why), "%s", e != NULL ? e : "not found");
		return;
	}
	for (size_t i = 0; i < l->nsyms; i++) {
		fn = dlsym(h, l->syms[i].name);
		if (fn == NULL) {
			snprintf(l->why, sizeof(l->why), "it has no %s", l->syms[i].name);
			memset(l->table, 0, l->table_size);
			dlclose(h);
			return;
		}
		/* POSIX gives a function pointer the representation of a void *. */
		memcpy((char *)l->table + l->syms[i].offset, &fn, sizeof(fn));
	}
	l->ok = true; /* the handle stays open for the process's life */
}

int
gw_lazylib_load(struct gw_lazylib *l, char *err, size_t errlen)
{
	bool ok;

	pthread_mutex_lock(&l->lock);
	if (!l->tried) {
		l->tried = true;
		lazylib_open(l);
	}
	ok = l->ok;
	pthread_mutex_unlock(&l->lock);
	if (ok)
		return 0;
	gw_set_err(err, errlen, "cannot load %s: %s; install %s", l->soname, l->why, l->package);
	return -ENOENT;
}
