// Clang thread-safety analysis attributes (-Wthread-safety), empty for other compilers. Internal
// to the library (installed only because a few public classes hold an annotated etlc::Mutex).
//
// A field ETLC_GUARDED_BY(mu) may be touched only with `mu` held; a function ETLC_REQUIRES(mu) is
// called with it held, ETLC_EXCLUDES(mu) without. CI compiles src/ with clang and -Wthread-safety
// -Werror (preset `tsa`), so a lock rule broken here is a compile error, not a race found later.
#pragma once

#if defined(__clang__)
#define ETLC_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ETLC_THREAD_ANNOTATION(x)
#endif

#define ETLC_CAPABILITY(x) ETLC_THREAD_ANNOTATION(capability(x))
#define ETLC_SCOPED_CAPABILITY ETLC_THREAD_ANNOTATION(scoped_lockable)
#define ETLC_GUARDED_BY(x) ETLC_THREAD_ANNOTATION(guarded_by(x))
#define ETLC_PT_GUARDED_BY(x) ETLC_THREAD_ANNOTATION(pt_guarded_by(x))
#define ETLC_ACQUIRED_BEFORE(...) ETLC_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ETLC_ACQUIRED_AFTER(...) ETLC_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ETLC_REQUIRES(...) ETLC_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ETLC_REQUIRES_SHARED(...) ETLC_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ETLC_EXCLUDES(...) ETLC_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ETLC_ACQUIRE(...) ETLC_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ETLC_ACQUIRE_SHARED(...) ETLC_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define ETLC_RELEASE(...) ETLC_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ETLC_RELEASE_SHARED(...) ETLC_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define ETLC_RETURN_CAPABILITY(x) ETLC_THREAD_ANNOTATION(lock_returned(x))
#define ETLC_NO_THREAD_SAFETY_ANALYSIS ETLC_THREAD_ANNOTATION(no_thread_safety_analysis)
