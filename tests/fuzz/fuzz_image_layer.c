/*
 * libFuzzer harness for the layer unpacker (exec/image/unpack.c): any bytes
 * as a layer (tar, gzip or zstd) applied onto a fresh directory. Nothing may
 * appear beside that root (an entry that escaped), and a failure always
 * comes with its message.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64];

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char root[128], beside[128], err[512];
	size_t entries = 0;
	int fd, rootfd, rc;

	if (base[0] == '\0') {
		snprintf(base, sizeof(base), "/tmp/fuzz-image-layer.XXXXXX");
		if (mkdtemp(base) == NULL)
			abort();
	}
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(beside, sizeof(beside), "%s/beside", base);
	if (mkdir(root, 0755) != 0)
		abort();
	fd = memfd_create("layer", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		abort();
	err[0] = '\0';
	rc = exec_image_unpack_layer(fd, rootfd, &entries, err, sizeof(err));
	if (rc > 0 || (rc < 0 && err[0] == '\0'))
		abort();
	close(rootfd);
	close(fd);
	/* Only root/ may be in base: anything beside it escaped. */
	if (access(beside, F_OK) == 0)
		abort();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
