// Clang thread-safety analysis attributes (-Wthread-safety), empty for other compilers.
//
// A field GUARDED_BY(mu) may be touched only with `mu` held; a function REQUIRES(mu) is called
// with it held, EXCLUDES(mu) without. CI compiles src/ with clang and -Wthread-safety -Werror
// (preset `tsa`), so a lock rule broken here is a compile error, not a race found later.
#pragma once

#if defined(__clang__)
#define ETLC_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ETLC_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) ETLC_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY ETLC_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) ETLC_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) ETLC_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) ETLC_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) ETLC_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) ETLC_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) ETLC_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) ETLC_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) ETLC_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RETURN_CAPABILITY(x) ETLC_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS ETLC_THREAD_ANNOTATION(no_thread_safety_analysis)
