/*
 * libarchive, opened when an image's layer or a docker-archive is first read
 * (gateway/core/lazylib.h): unpack.c and store.c include this header instead
 * of <archive.h> and <archive_entry.h>, whose types they keep, and call
 * libarchive's functions by their own names, which map to a table filled by
 * exec_image_archive_load.
 */
#ifndef TOLLGATE_EXEC_IMAGE_LIBARCHIVE_H
#define TOLLGATE_EXEC_IMAGE_LIBARCHIVE_H

#include <stddef.h>

#include <archive.h>
#include <archive_entry.h>

/* Every libarchive function tollgate calls: a new one is a line here and below. */
#define EXEC_IMAGE_ARCHIVE_FUNCS(X)                                                                \
	X(archive_entry_filetype)                                                                  \
	X(archive_entry_hardlink)                                                                  \
	X(archive_entry_mode)                                                                      \
	X(archive_entry_pathname)                                                                  \
	X(archive_entry_size)                                                                      \
	X(archive_entry_symlink)                                                                   \
	X(archive_error_string)                                                                    \
	X(archive_read_data_block)                                                                 \
	X(archive_read_free)                                                                       \
	X(archive_read_new)                                                                        \
	X(archive_read_next_header)                                                                \
	X(archive_read_open_fd)                                                                    \
	X(archive_read_open_filename)                                                              \
	X(archive_read_support_filter_gzip)                                                        \
	X(archive_read_support_filter_none)                                                        \
	X(archive_read_support_filter_zstd)                                                        \
	X(archive_read_support_format_tar)

struct exec_image_archive_table {
#define EXEC_IMAGE_ARCHIVE_SLOT(name) __typeof__(name) *p_##name;
	EXEC_IMAGE_ARCHIVE_FUNCS(EXEC_IMAGE_ARCHIVE_SLOT)
#undef EXEC_IMAGE_ARCHIVE_SLOT
};

extern struct exec_image_archive_table exec_image_archive;

/*
 * Opens libarchive.so.13 once; 0, or -ENOENT with err "cannot load
 * libarchive.so.13: WHY; install libarchive13". No libarchive function may be
 * called before it succeeds.
 */
int exec_image_archive_load(char *err, size_t errlen);

#define archive_entry_filetype (exec_image_archive.p_archive_entry_filetype)
#define archive_entry_hardlink (exec_image_archive.p_archive_entry_hardlink)
#define archive_entry_mode (exec_image_archive.p_archive_entry_mode)
#define archive_entry_pathname (exec_image_archive.p_archive_entry_pathname)
#define archive_entry_size (exec_image_archive.p_archive_entry_size)
#define archive_entry_symlink (exec_image_archive.p_archive_entry_symlink)
#define archive_error_string (exec_image_archive.p_archive_error_string)
#define archive_read_data_block (exec_image_archive.p_archive_read_data_block)
#define archive_read_free (exec_image_archive.p_archive_read_free)
#define archive_read_new (exec_image_archive.p_archive_read_new)
#define archive_read_next_header (exec_image_archive.p_archive_read_next_header)
#define archive_read_open_fd (exec_image_archive.p_archive_read_open_fd)
#define archive_read_open_filename (exec_image_archive.p_archive_read_open_filename)
#define archive_read_support_filter_gzip (exec_image_archive.p_archive_read_support_filter_gzip)
#define archive_read_support_filter_none (exec_image_archive.p_archive_read_support_filter_none)
#define archive_read_support_filter_zstd (exec_image_archive.p_archive_read_support_filter_zstd)
#define archive_read_support_format_tar (exec_image_archive.p_archive_read_support_format_tar)

#endif
