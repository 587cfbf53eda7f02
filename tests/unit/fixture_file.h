/*
 * Small file helpers the unit tests share (policy files, reloads): written
 * whole, or the test fails.
 */
#ifndef TOLLGATE_TEST_FIXTURE_FILE_H
#define TOLLGATE_TEST_FIXTURE_FILE_H

/* Creates or truncates path and writes text; any failure fails the test. */
void fixture_write_file(const char *path, const char *text);

#endif
