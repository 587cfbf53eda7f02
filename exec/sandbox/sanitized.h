/*
 * EXEC_SANITIZED: 1 in an AddressSanitizer build (gcc's and clang's ways of
 * saying so), else 0. LeakSanitizer checks at exit by ptrace-attaching to the
 * process from a helper, which some of the hardening has to leave possible.
 */
#ifndef TOLLGATE_EXEC_SANITIZED_H
#define TOLLGATE_EXEC_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define EXEC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EXEC_SANITIZED 1
#endif
#endif
#ifndef EXEC_SANITIZED
#define EXEC_SANITIZED 0
#endif

#endif
